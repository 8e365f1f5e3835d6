/*
 * The typed errors of Waypoint, by what they are about: the base class and shared helpers
 * (waypoint-error.ts), the store's (store-errors.ts), and the rest here. Every one is exported from here.
 *
 * How a message is written (test/contract/error-messages.test.ts checks the mechanical part):
 * - Full sentences, each ending with one period: no '..', '.:', ' .' or '!.', no trailing space. An
 *   ellipsis inside code ('waypoint.enqueue(...)') is code, not punctuation.
 * - In this order: what happened, to which run (and step, when there is one), what to do next, naming a
 *   concrete call, command or option ("Pass { waitForLockMs }", "call waypoint.resume('r1')").
 * - Ids and names are quoted with single quotes: run 'q3-aapl', step 'Research/gather', pipeline
 *   'Report', signal 'approval', side effect 'send-email'. Code (calls, options, class names) is bare.
 * - A caught error's message goes in as a clause through reasonOf(cause): its own closing period is
 *   dropped, so "failed: upstream 503." never ends in "..", and it never changes the sentence around it.
 * - Errors a user can meet are WaypointErrors with a stable code; a new code is added to a class here (or
 *   next to its subject, exported from the entry point). A plain `new Error(` in src/ carries a
 *   `// plain Error: <why>` comment: an internal invariant, or the clause a typed error wraps as its cause.
 * - CLI errors print as `waypoint: <message>` and follow the same rules. Log lines at warn or error level
 *   are short lowercase event phrases without a final period ('lease lost; stopping executor'), with the
 *   run id, step and error in their fields, not in the text.
 */
import { WaypointError, reasonOf } from './waypoint-error';

export * from './error-codes';
export * from './waypoint-error';
export * from './store-errors';

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

/**
 * A stored value cannot be read back by this process: not JSON, a tag this release does not know, or
 * nested deeper than the depth limit (written by another process or release, or altered). Loads throw it;
 * `waypoint.verify` and `waypoint-durable verify` report the row that holds it as corrupted, naming run and
 * sequence. Its code is the one a refused value has (`UNSERIALIZABLE_VALUE`, which an unknown tag on read
 * has always had); the class tells a read from a write.
 *
 * @example
 * try { await waypoint.checkpoint(runId); }
 * catch (err) { if (err instanceof UndecodableValueError) await waypoint.verify(runId); } // names the row
 */
export class UndecodableValueError extends SerializationError {}

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
      `Run '${runId}' was checkpointed by '${pipeline}@${storedVersion}', but the code is '${pipeline}@${currentVersion}'` +
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
      `Run '${runId}' is being executed by ${owner === null ? 'another worker' : `'${owner}'`}` +
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
 * A batch given to a store's `appendEvents` cannot be stored (empty, or an event that is not a `part`,
 * `retract` or `status` event with its fields of the right types); nothing was written. `index` is the
 * bad event's position in the batch (-1 for the batch itself).
 *
 * @example
 * catch (err) { if (err instanceof InvalidStreamEventError) console.error(err.index, err.message); }
 */
export class InvalidStreamEventError extends WaypointError {
  /** The refused event's position in the batch; -1 when the batch itself is refused (empty). */
  readonly index: number;
  constructor(runId: string, index: number, problem: string) {
    super(
      'INVALID_STREAM_EVENT',
      `${index < 0 ? 'Stream append' : `Stream event ${index}`} of run '${runId}' was refused: ${reasonOf(problem)}. ` +
        `Nothing was written; pass events of kind 'part' ({ step, attempt, data }), 'retract' ({ step, attempt }) or 'status' ({ status, detail? }).`,
      { runId },
    );
    this.index = index;
  }
}

/**
 * `ctx.emit(part)` refused a part: its serialized JSON is over `liveOutput.maxPartBytes` (`limit: 'part-bytes'`),
 * or the run's stream already holds `liveOutput.maxEventsPerRun` events (`limit: 'events'`). Nothing was emitted;
 * the step's attempt goes on unless the error escapes it, and is not retried for it.
 *
 * @example
 * try { ctx.emit(bigChunk); } catch (err) { if (err instanceof StreamLimitError) ctx.emit({ ref: await upload(bigChunk) }); else throw err; }
 */
export class StreamLimitError extends WaypointError {
  /** Which limit refused the part: its size (`part-bytes`) or the run's stream length (`events`). */
  readonly limit: 'part-bytes' | 'events';
  /** The part's size in bytes (`part-bytes`), or the stream's length in events (`events`). */
  readonly actual: number;
  /** The limit in force (`liveOutput.maxPartBytes` or `liveOutput.maxEventsPerRun`). */
  readonly max: number;
  constructor(runId: string, step: string, limit: 'part-bytes' | 'events', actual: number, max: number) {
    super(
      'STREAM_LIMIT',
      limit === 'part-bytes'
        ? `Step '${step}' of run '${runId}' emitted a part of ${actual} bytes of serialized JSON, over the limit of ${max} bytes; nothing was emitted. ` +
            `Emit smaller parts (a reference to large data), or raise Waypoint.create({ liveOutput: { maxPartBytes } }).`
        : `Step '${step}' of run '${runId}' emitted a part when the run's stream already held ${actual} events, its limit of ${max}; nothing was emitted. ` +
            `Emit fewer, larger parts, or raise Waypoint.create({ liveOutput: { maxEventsPerRun } }).`,
      { runId, step },
    );
    this.limit = limit;
    this.actual = actual;
    this.max = max;
  }
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
        `Use a name of 1 to 128 characters, without control characters (NUL, tab, newline, ...), line separators or ` +
        `bidirectional-override characters, and without leading or trailing whitespace, e.g. 'approval' or 'review:legal'.`,
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
    super(
      'STEP_TIMEOUT',
      `Step '${step}' of run '${runId}' exceeded its timeout of ${timeoutMs} ms; the attempt was aborted. If the step needs longer, raise @Step({ timeoutMs }).`,
      { runId, step },
    );
  }
}

/** The run was cancelled; it is never resumed by accident. */
export class RunCancelledError extends WaypointError {
  constructor(runId: string) {
    super('RUN_CANCELLED', `Run '${runId}' was cancelled. A cancelled run cannot be resumed; fork it or start a new run.`, { runId });
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
    super(
      'SIDE_EFFECT_FAILED',
      `Side effect '${operation}' in step '${step}' of run '${runId}' failed: ${reason}. It was not marked committed, so the step's next attempt (a retry, or waypoint.resume('${runId}')) runs it again. Fix the cause first.`,
      {
        runId,
        step,
        cause,
      },
    );
    this.operationKey = operationKey;
  }
}

/**
 * The checkpoint store has no output streams (a user's own store without `appendEvents`, `readEvents`,
 * `waitForEvents` and `streamLength`), so `waypoint.stream` cannot read run `runId`'s live output.
 *
 * @example
 * catch (err) { if (err instanceof StreamsUnsupportedError) console.warn('no live output with this store'); }
 */
export class StreamsUnsupportedError extends WaypointError {
  constructor(runId: string, storeName: string) {
    super(
      'STREAMS_UNSUPPORTED',
      `The live output of run '${runId}' cannot be read: the checkpoint store (${storeName}) has no output streams. ` +
        'Use a store of this package (memory, SQLite, PostgreSQL, Redis, tiered), or give yours appendEvents, readEvents, waitForEvents and streamLength (see RunStreamStore).',
      { runId },
    );
  }
}
