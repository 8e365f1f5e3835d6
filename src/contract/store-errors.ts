import { WaypointError, reasonOf } from './waypoint-error';

/** A stored row fails its integrity check. */
export class CheckpointCorruptedError extends WaypointError {
  readonly sequence: number;
  constructor(runId: string, sequence: number, why: string) {
    super(
      'CHECKPOINT_CORRUPTED',
      `Checkpoint of run '${runId}' at sequence ${sequence} is corrupted: ${reasonOf(why)}. ` +
        `Restore the row from a backup, or fork the run from an earlier sequence with waypoint.fork().`,
      { runId },
    );
    this.sequence = sequence;
  }
}

/** The checkpoint store cannot be reached, or did not answer in time (retrying later may succeed). */
export class StoreUnavailableError extends WaypointError {
  constructor(backend: string, operation: string, cause: unknown, runId?: string) {
    const reason = reasonOf(cause);
    super(
      'STORE_UNAVAILABLE',
      `Checkpoint store (${backend}) failed during ${operation}${runId ? ` for run '${runId}'` : ''}: ${reason}. ` +
        `Nothing past the last committed checkpoint was recorded; resume the run once the store is reachable.`,
      { runId, cause },
    );
  }
}

/**
 * The store was reached and refused the operation itself: a value it cannot hold (PostgreSQL's encoding
 * errors, a value too long), a constraint violation, SQL it rejects, a Redis error reply. Unlike
 * `STORE_UNAVAILABLE`, retrying the same call will not help; the error's cause says what the store refused.
 *
 * @example
 * catch (err) { if (err instanceof WaypointError && err.code === 'STORE_REJECTED') alert(err.message); }
 */
export class StoreRejectedError extends WaypointError {
  constructor(backend: string, operation: string, cause: unknown, runId?: string) {
    const reason = reasonOf(cause);
    super(
      'STORE_REJECTED',
      `Checkpoint store (${backend}) refused ${operation}${runId ? ` for run '${runId}'` : ''}: ${reason}. ` +
        `Nothing past the last committed checkpoint was recorded. Retrying will not help: change the value or statement the store refused (the cause says which).`,
      { runId, cause },
    );
  }
}

// Node socket errors and driver errors that say the store could not be reached or answered in time.
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTCONN',
  'ECONNCLOSED',
]);
// PostgreSQL SQLSTATE classes and codes that are about the server or the connection, not the statement:
// connection exceptions (08), a login or database the server refuses at connect time (28, 3D), insufficient resources (53: too many connections, disk full, out of memory),
// operator intervention (57: shutdown, statement timeout), system errors (58), serialization failures and
// deadlocks (40) and lock timeouts (55P03), which succeed when retried.
const PG_UNREACHABLE_CLASSES = ['08', '28', '3D', '53', '57', '58', '40', 'XX'];
const PG_UNREACHABLE_CODES = new Set(['55P03', '55006']);
// SQLite result codes (better-sqlite3's `code`, e.g. SQLITE_BUSY_SNAPSHOT) about the file, not the statement.
const SQLITE_UNREACHABLE = /^SQLITE_(BUSY|LOCKED|IOERR|CANTOPEN|FULL|NOMEM|PROTOCOL|READONLY|INTERRUPT|NOLFS)/;
// Redis error replies that mean "not now" (loading, a script running, a failover, a full memory).
const REDIS_UNREACHABLE = /^(LOADING|BUSY|READONLY|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|NOREPLICAS|OOM|MISCONF)\b/;

/**
 * True when a driver error means the store refused the operation itself (a SQLSTATE outside the
 * connection / resource classes, a SQLite constraint or SQL error, a Redis error reply); false for
 * refused, reset or timed-out connections, an exhausted pool, a busy or locked database, and for
 * anything it does not recognize (those stay `STORE_UNAVAILABLE`, as before).
 *
 * @example
 * isStoreRejection(pgError22021); // true: "invalid byte sequence for encoding UTF8: 0x00"
 * isStoreRejection(econnrefused); // false
 */
export function isStoreRejection(error: unknown): boolean {
  const outer = error as { driverError?: unknown } | null;
  const cause = (outer && typeof outer === 'object' && outer.driverError) || error;
  if (!cause || typeof cause !== 'object') return false;
  const { code, severity, name, message } = cause as { code?: unknown; severity?: unknown; name?: unknown; message?: unknown };
  if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) return false;
  // pg's DatabaseError carries a severity and a five-character SQLSTATE.
  if (typeof code === 'string' && typeof severity === 'string' && /^[0-9A-Z]{5}$/.test(code)) {
    return !PG_UNREACHABLE_CLASSES.includes(code.slice(0, 2)) && !PG_UNREACHABLE_CODES.has(code);
  }
  if (typeof code === 'string' && code.startsWith('SQLITE_')) return !SQLITE_UNREACHABLE.test(code);
  if (name === 'ReplyError' && typeof message === 'string') return !REDIS_UNREACHABLE.test(message);
  return false;
}

/**
 * The typed error for a driver failure during a store operation: `STORE_REJECTED` when the store was
 * reached and refused it (see {@link isStoreRejection}), `STORE_UNAVAILABLE` otherwise.
 *
 * @example
 * catch (err) { if (err instanceof WaypointError) throw err; throw storeFailure('postgres', 'appendStep', err, runId); }
 */
export function storeFailure(backend: string, operation: string, cause: unknown, runId?: string): StoreUnavailableError | StoreRejectedError {
  return isStoreRejection(cause) ? new StoreRejectedError(backend, operation, cause, runId) : new StoreUnavailableError(backend, operation, cause, runId);
}

/**
 * Write-behind: Redis and PostgreSQL hold two different histories of a run that neither extends (their
 * rows at the same sequence differ), so no copy can be made without losing one of them. Code
 * `TIER_DIVERGED`. PostgreSQL's rows are left as they are; nothing of the run is copied until an operator
 * chooses a history.
 */
export class TierDivergedError extends WaypointError {
  /** The sequence at which the two copies were compared and differ. */
  readonly sequence: number;
  readonly redisLastSequence: number;
  readonly postgresLastSequence: number;
  constructor(runId: string, sequence: number, redisLastSequence: number, postgresLastSequence: number) {
    super(
      'TIER_DIVERGED',
      `Run '${runId}' has two different histories: Redis holds sequences up to ${redisLastSequence}, PostgreSQL up to ${postgresLastSequence}, ` +
        `and their rows at sequence ${sequence} differ (Redis lost data and the run went on from its older copy). PostgreSQL's rows were left unchanged ` +
        `and nothing of the run is copied to it. Keep PostgreSQL's history with store.adoptPostgresCopy('${runId}') (Redis's copy is replaced and the run resumes from PostgreSQL's last step), ` +
        `or fork the run from Redis's copy with waypoint.fork() first if its newer steps must be kept.`,
      { runId },
    );
    this.sequence = sequence;
    this.redisLastSequence = redisLastSequence;
    this.postgresLastSequence = postgresLastSequence;
  }
}
