import { statSync } from 'node:fs';

/** A file's identity: the device and inode a path led to. */
interface FileId {
  dev: number;
  ino: number;
}

/**
 * The database file (and its `-wal`) was deleted, or replaced by another file, while the store had it
 * open. SQLite keeps writing into the open, unlinked inode, and the next process to open the path finds
 * another file or none: every step recorded from then on would be lost and run again, side effects
 * included. Carries no driver code, so the store reports it as STORE_UNAVAILABLE.
 */
export class SqliteFileMovedError extends Error {
  constructor(
    readonly path: string,
    what: string,
  ) {
    super(
      `the SQLite file '${path}' was ${what} while this store had it open; what it wrote since then is reachable only through this process's open handle ` +
        `(copy it from /proc/${process.pid}/fd before the process exits), and nothing more is written to it. Put the database file back in place, then open a new store and resume the run`,
    );
    this.name = 'SqliteFileMovedError';
  }
}

/**
 * Watches that the path the store opened still leads to the file it has open. better-sqlite3 exposes no
 * file descriptor to fstat, so the identity (device + inode) of `stat(path)` taken at open is compared
 * with `stat(path)` later. `checkFile` (one stat, a few microseconds against a synchronous-FULL append's
 * ~250 us) runs before every step append, so no step is recorded into a file that no one can open again;
 * `checkAll` adds the `-wal` file (whose loss drops every commit since the last checkpoint) and runs on
 * every other write, lease renewals included. Once broken it stays broken: the connection is on the old
 * inode for good.
 *
 * @example
 * const identity = SqliteFileIdentity.take('/var/lib/app/waypoint.db');
 * identity.checkFile(); // throws SqliteFileMovedError after `rm /var/lib/app/waypoint.db`
 */
export class SqliteFileIdentity {
  private broken: SqliteFileMovedError | null = null;

  private constructor(
    readonly path: string,
    private readonly file: FileId,
    private wal: FileId | null,
  ) {}

  /** The identity of `path` now (just after the store opened it); the `-wal`'s if SQLite has created it. */
  static take(path: string): SqliteFileIdentity {
    const file = idOf(path);
    if (!file) throw new SqliteFileMovedError(path, 'deleted as it was being opened');
    return new SqliteFileIdentity(path, file, idOf(`${path}-wal`));
  }

  /** Throws `SqliteFileMovedError` when the database file is gone or another file is at its path. */
  checkFile(): void {
    if (this.broken) throw this.broken;
    const now = idOf(this.path);
    if (!now) this.fail(this.path, 'deleted');
    else if (now.ino !== this.file.ino || now.dev !== this.file.dev) this.fail(this.path, `replaced by another file (inode ${this.file.ino} is now ${now.ino})`);
  }

  /** `checkFile`, and the same for the `-wal` file once SQLite has created it. */
  checkAll(): void {
    this.checkFile();
    const walPath = `${this.path}-wal`;
    const now = idOf(walPath);
    // The -wal exists from the first transaction in WAL mode until the last connection closes: while this one is open it stays.
    if (this.wal === null) this.wal = now;
    else if (!now) this.fail(walPath, 'deleted (its commits since the last checkpoint are in no file another process can open)');
    else if (now.ino !== this.wal.ino || now.dev !== this.wal.dev) this.fail(walPath, 'replaced by another file');
  }

  private fail(path: string, what: string): never {
    this.broken = new SqliteFileMovedError(path, what);
    throw this.broken;
  }
}

function idOf(path: string): FileId | null {
  const stats = statSync(path, { throwIfNoEntry: false });
  return stats ? { dev: stats.dev, ino: stats.ino } : null;
}
