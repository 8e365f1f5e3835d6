import { WaypointError } from '../contract/errors';

/**
 * The database and queue client packages, loaded on first use instead of when Waypoint is imported, and
 * installed by the user who needs them (optional peer dependencies). A user on the embedded SQLite store
 * never loads pg, ioredis, pg-boss or BullMQ; each loads the first time a store, queue or command that
 * needs it is constructed, or fails then with `MISSING_DEPENDENCY` saying what to install.
 *
 * Types come from `import type` at the call sites, which costs nothing at run time.
 *
 * @example
 * const { Redis } = ioredis();
 * const client = new Redis(url, { lazyConnect: true });
 */

/** The `ioredis` package (Redis store, tiered store, BullMQ queue, LangGraph on Redis). */
export function ioredis(): typeof import('ioredis') {
  return load('ioredis', 'the Redis and tiered stores and the BullMQ queue') as typeof import('ioredis');
}

/** The `pg` package (PostgreSQL store, pg-boss queue, the CLI on PostgreSQL). */
export function pg(): typeof import('pg') {
  return load('pg', 'the PostgreSQL and tiered stores and the pg-boss queue') as typeof import('pg');
}

/** The `pg-boss` package's constructor. */
export function pgBoss(): typeof import('pg-boss') {
  return load('pg-boss', 'the pg-boss queue (pgBossQueue)') as typeof import('pg-boss');
}

/** The `bullmq` package. */
export function bullmq(): typeof import('bullmq') {
  return load('bullmq', 'the BullMQ queue (bullmqQueue)') as typeof import('bullmq');
}

/**
 * The `typeorm` package: loaded to migrate a SQL store's schema, for a store with `entities`, and on first
 * use of `store.dataSource` or a transactional side effect; never by a store whose schema is current.
 */
export function typeorm(): typeof import('typeorm') {
  return load('typeorm', 'SQL store migrations and transactional side effects') as typeof import('typeorm');
}

let sqliteNativeChecked = false;

/**
 * The `better-sqlite3` package, with its native build checked once per process (an in-memory database
 * opened and closed). A package manager that ran no install scripts (npm 11 without approval, pnpm,
 * `--ignore-scripts`) or a build for another Node.js leaves the JavaScript without its addon: that is
 * `MISSING_DEPENDENCY` with the commands that build it, not a store outage.
 */
export function betterSqlite3(): unknown {
  const Database = load('better-sqlite3', 'the SQLite store (the default store) and the CLI on SQLite') as new (path: string) => { close(): void };
  if (sqliteNativeChecked) return Database;
  try {
    new Database(':memory:').close();
  } catch (error) {
    if (!isMissingNativeBuild(error)) throw error;
    const reason = (error instanceof Error ? error.message : String(error)).split('\n')[0].slice(0, 300);
    throw new WaypointError(
      'MISSING_DEPENDENCY',
      `The 'better-sqlite3' package is installed without a working native build for Node.js ${process.version} (${reason}). ` +
        'Its install script did not run or built for another Node.js: with npm 11, approve it (npm install-scripts approve better-sqlite3, ' +
        'or "allowScripts": { "better-sqlite3": true } in package.json) and run npm rebuild better-sqlite3; with pnpm, pnpm approve-builds then pnpm rebuild better-sqlite3.',
      { cause: error },
    );
  }
  sqliteNativeChecked = true;
  return Database;
}

/** An addon that is absent (bindings found no file) or cannot be loaded by this Node.js (ABI, platform). */
function isMissingNativeBuild(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return code === 'ERR_DLOPEN_FAILED' || /Could not locate the bindings file|NODE_MODULE_VERSION|better_sqlite3\.node/.test(message);
}

function load(name: string, usedBy: string): unknown {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peers are loaded lazily, on first use, by a name chosen at run time
    return require(name) as unknown;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && String((error as Error).message).includes(`'${name}'`)) {
      throw new WaypointError('MISSING_DEPENDENCY', `The '${name}' package is not installed; ${usedBy} need it. Install it next to Waypoint (npm install ${name}).`, {
        cause: error,
      });
    }
    throw error;
  }
}
