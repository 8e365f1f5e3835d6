/**
 * Every error Waypoint raises extends {@link WaypointError} and carries a stable `code`, so callers can
 * branch on `err.code` instead of parsing messages. Messages say what happened, to which run and step,
 * and what to do about it.
 *
 * @example
 * try { await waypoint.run(Analysis, { runId, input }); }
 * catch (err) { if (err instanceof WaypointError && err.code === 'RUN_LOCKED') retryLater(); else throw err; }
 */
export class WaypointError extends Error {
  readonly code: string;
  readonly runId?: string;
  readonly step?: string;

  constructor(code: string, message: string, details: { runId?: string; step?: string; cause?: unknown } = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.code = code;
    this.runId = details.runId;
    this.step = details.step;
  }
}

/** A decorator or pipeline definition is wrong (found when the class is declared or its plan is built). */
export class PipelineDefinitionError extends WaypointError {
  constructor(message: string) {
    super('PIPELINE_DEFINITION', message);
  }
}

/** One failing property of a state object, as reported by class-validator. */
export interface StateIssue {
  property: string;
  constraints: Record<string, string>;
}

/** The pipeline input (or a state reconstructed from storage) does not satisfy the pipeline's state class. */
export class InvalidStateError extends WaypointError {
  readonly issues: StateIssue[];
  constructor(message: string, issues: StateIssue[], details: { runId?: string; step?: string } = {}) {
    super('INVALID_STATE', message, details);
    this.issues = issues;
  }
}

/**
 * `strictState` is on and an input, a step's output or a fork's `patchState` sets properties the
 * pipeline's state class does not declare. Nothing was written; a step's refusal is not retried (the
 * same code returns the same keys). `properties` lists every undeclared property.
 *
 * @example
 * catch (err) { if (err instanceof UndeclaredStateError) console.error(err.properties); }
 */
export class UndeclaredStateError extends WaypointError {
  /** Every property that was refused, in the order the value holds them. */
  readonly properties: string[];
  constructor(message: string, properties: string[], details: { runId?: string; step?: string } = {}) {
    super('UNDECLARED_STATE', message, details);
    this.properties = properties;
  }
}

/** A value cannot be stored: a function, a symbol, a class instance, a circular reference, ... */
export class SerializationError extends WaypointError {
  readonly path: string;
  constructor(message: string, path: string, details: { runId?: string; step?: string } = {}) {
    super('UNSERIALIZABLE_VALUE', message, details);
    this.path = path;
  }
}

/**
 * A step tried to change `ctx.state` (or a value in it, which is frozen) in place. A programming error: the
 * step fails at once, without retries, since another attempt would do the same. Return the change instead.
 */
export class StateMutationError extends WaypointError {
  /** What the step did, e.g. "it set 'title'". */
  readonly what: string;
  constructor(what: string, details: { runId?: string; step?: string; cause?: unknown } = {}) {
    const where = details.step && details.runId ? `Step '${details.step}' of run '${details.runId}' ` : 'A step ';
    super(
      'STATE_MUTATED',
      `${where}tried to change the shared state in place (${what}). ctx.state and every value in it are frozen: ` +
        'return the change from the step instead (e.g. return { items: [...ctx.state.items, item] }). The step was not retried.',
      details,
    );
    this.what = what;
  }
}

/**
 * The container could not build an agent: a constructor parameter without recorded types (decorator
 * metadata not emitted), or a dependency nothing binds. Names the agent and the parameter; nothing ran.
 */
export class InjectionError extends WaypointError {
  constructor(message: string, details: { runId?: string; cause?: unknown } = {}) {
    super('INJECTION_FAILED', message, details);
  }
}

/** `waypoint.resume(runId)` / `waypoint.get(runId)` on a run id that the store does not know. */
export class RunNotFoundError extends WaypointError {
  constructor(runId: string) {
    super('RUN_NOT_FOUND', `Run '${runId}' does not exist in the checkpoint store. Start it with waypoint.run(Pipeline, { runId, input }).`, { runId });
  }
}

/** The stored run belongs to another pipeline than the one asked to run it. */
export class PipelineMismatchError extends WaypointError {
  constructor(runId: string, stored: string, requested: string) {
    super('PIPELINE_MISMATCH', `Run '${runId}' was started by pipeline '${stored}', not '${requested}'. Use a new runId for '${requested}', or resume it with '${stored}'.`, {
      runId,
    });
  }
}

/** The run was started with a different input than the one given now. */
export class InputMismatchError extends WaypointError {
  constructor(runId: string) {
    super('INPUT_MISMATCH', `Run '${runId}' already exists with a different input. Omit 'input' (or pass the original) to resume it, or use a new runId to start over.`, { runId });
  }
}

/** The stored run was written by another pipeline version and no migration path is registered. */
export class VersionMismatchError extends WaypointError {
  readonly storedVersion: string;
  readonly currentVersion: string;
  constructor(runId: string, pipeline: string, storedVersion: string, currentVersion: string, why?: string) {
    super(
      'VERSION_MISMATCH',
      `Run '${runId}' was checkpointed by ${pipeline}@${storedVersion}, but the code is ${pipeline}@${currentVersion}` +
        (why ? ` (${why})` : '') +
        `. Register a checkpoint migration in @Pipeline({ migrations: [{ from: '${storedVersion}', to: '${currentVersion}', migrate }] }), ` +
        `finish the run with the old version deployed, or start a new run.`,
      { runId },
    );
    this.storedVersion = storedVersion;
    this.currentVersion = currentVersion;
  }
}

/** The recorded steps of a run do not match the pipeline's step plan (same version, different code). */
export class PlanMismatchError extends WaypointError {
  constructor(runId: string, message: string) {
    super('PLAN_MISMATCH', `Run '${runId}': ${message}`, { runId });
  }
}

/** Another live executor holds the run's lease. */
export class RunLockedError extends WaypointError {
  readonly owner: string | null;
  readonly expiresAt: Date | null;
  constructor(runId: string, owner: string | null, expiresAt: Date | null) {
    super(
      'RUN_LOCKED',
      `Run '${runId}' is being executed by '${owner ?? 'another worker'}'` +
        (expiresAt ? ` (lease valid until ${expiresAt.toISOString()})` : '') +
        `. Only one executor may advance a run; wait for it to finish or for its lease to expire, or pass { waitForLockMs }.`,
      { runId },
    );
    this.owner = owner;
    this.expiresAt = expiresAt;
  }
}

/** This executor's lease was taken over (fenced): its writes are rejected and it stops. */
export class LeaseLostError extends WaypointError {
  constructor(runId: string, epoch: number, step?: string) {
    super(
      'LEASE_LOST',
      `Executor lost the lease on run '${runId}' (epoch ${epoch} is no longer current)` +
        (step ? ` while running step '${step}'` : '') +
        `. Another worker now owns the run; this executor stopped and recorded nothing further.`,
      { runId, step },
    );
  }
}

/**
 * A cause's message as a clause inside another sentence: without its own closing period or trailing space,
 * so "failed: upstream 503." does not end in a doubled period.
 */
export function reasonOf(cause: unknown): string {
  return (cause instanceof Error ? cause.message : String(cause)).replace(/[.\s]+$/, '');
}

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
        `Nothing past the last committed checkpoint was recorded. Retrying will not help: the value or statement must change (the cause says what the store refused).`,
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
 * A signal name breaks the rule of `checkSignalName` (empty, not a string, longer than 128 characters, a
 * control or line-separator character, ...): refused at `waypoint.signal()`, `ctx.waitFor()`, the CLI
 * and the page before anything is stored.
 *
 * @example
 * catch (err) { if (err instanceof WaypointError && err.code === 'INVALID_SIGNAL_NAME') return badRequest(err.message); }
 */
export class InvalidSignalNameError extends WaypointError {
  constructor(shown: string, reason: string, details: { runId?: string; step?: string } = {}) {
    const where = details.step ? ` in step '${details.step}' of run '${details.runId}'` : details.runId ? ` for run '${details.runId}'` : '';
    super(
      'INVALID_SIGNAL_NAME',
      `Signal name ${shown}${where} is not valid: ${reason}. Nothing was stored. ` +
        `A signal name is 1 to 128 characters, without control characters (NUL, tab, newline, ...), line separators or ` +
        `bidirectional-override characters, and without leading or trailing whitespace; e.g. 'approval' or 'review:legal'.`,
      details,
    );
  }
}

/** A signal's payload, serialized, is larger than the Waypoint's `maxSignalPayloadBytes` (default 256 KiB). */
export class SignalPayloadTooLargeError extends WaypointError {
  readonly bytes: number;
  readonly limit: number;
  constructor(runId: string, name: string, bytes: number, limit: number) {
    super(
      'SIGNAL_PAYLOAD_TOO_LARGE',
      `The payload of signal '${name}' for run '${runId}' is ${bytes} bytes of serialized JSON, over the limit of ${limit} bytes; nothing was stored. ` +
        `Store large data elsewhere (a file, an object store) and signal a reference to it, or raise Waypoint.create({ maxSignalPayloadBytes }).`,
      { runId },
    );
    this.bytes = bytes;
    this.limit = limit;
  }
}

/** A step failed after exhausting its attempts; the run is marked `failed`. */
export class StepFailedError extends WaypointError {
  readonly attempts: number;
  constructor(runId: string, step: string, attempts: number, cause: unknown) {
    const reason = reasonOf(cause);
    super(
      'STEP_FAILED',
      `Step '${step}' of run '${runId}' failed after ${attempts} attempt(s): ${reason}. ` + `Fix the cause and call waypoint.resume('${runId}') to retry from this step.`,
      { runId, step, cause },
    );
    this.attempts = attempts;
  }
}

/** Throw this from a step or side effect to fail it at once, without further retries. */
export class NonRetryableError extends WaypointError {
  constructor(message: string, cause?: unknown) {
    super('NON_RETRYABLE', message, { cause });
  }
}

/** A step attempt ran past its `timeoutMs`. */
export class StepTimeoutError extends WaypointError {
  constructor(runId: string, step: string, timeoutMs: number) {
    super('STEP_TIMEOUT', `Step '${step}' of run '${runId}' exceeded its timeout of ${timeoutMs} ms; the attempt was aborted.`, { runId, step });
  }
}

/** The run was cancelled; it is never resumed by accident. */
export class RunCancelledError extends WaypointError {
  constructor(runId: string) {
    super('RUN_CANCELLED', `Run '${runId}' was cancelled. A cancelled run cannot be resumed; fork it or start a new run.`, { runId });
  }
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

/**
 * A run was found `failed` under the lease by an execution that may not retry it (`RunOptions.retryFailed:
 * false`: a fleet wake-up or recovery, which the runtime sends for itself): nothing ran, nothing was written.
 *
 * @example
 * catch (err) { if (err instanceof WaypointError && err.code === 'RUN_NOT_RETRIED') await waypoint.enqueue(P, { runId }); }
 */
export class RunNotRetriedError extends WaypointError {
  constructor(runId: string) {
    super(
      'RUN_NOT_RETRIED',
      `Run '${runId}' had failed by the time this execution took its lease, and this execution may not retry it (a fleet wake-up or recovery, not a retry): nothing ran. To run it again, retry it: waypoint.enqueue(...) or waypoint.resume('${runId}').`,
      { runId },
    );
  }
}

/** A `@SideEffect` method was called outside of a running step. */
export class SideEffectOutsideRunError extends WaypointError {
  constructor(owner: string, operation: string) {
    super(
      'SIDE_EFFECT_OUTSIDE_RUN',
      `Side effect '${operation}' (${owner}) was called outside a Waypoint step, so it cannot be guarded. ` +
        `Call it from a @Step method, or use guardedExecute(key, fn) with an explicit key.`,
    );
  }
}

/** A side effect failed; it was recorded as failed and never marked committed. */
export class SideEffectFailedError extends WaypointError {
  readonly operationKey: string;
  constructor(runId: string, step: string, operation: string, operationKey: string, cause: unknown) {
    const reason = reasonOf(cause);
    super('SIDE_EFFECT_FAILED', `Side effect '${operation}' in step '${step}' of run '${runId}' failed: ${reason}. It was not marked committed.`, {
      runId,
      step,
      cause,
    });
    this.operationKey = operationKey;
  }
}

/** A stored, JSON form of any thrown value: name, message and code, never the stack. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return JSON.stringify({ name: error.name, message: error.message, code: (error as { code?: unknown }).code ?? null });
  return JSON.stringify({ name: 'Error', message: String(error), code: null });
}
