import { NonRetryableError, SideEffectFailedError, SideEffectOutsideRunError, WaypointError, type WaypointErrorCode } from '../contract/errors';
import type { SideEffectOptions } from '../decorators/options';
import { guardedExecute } from '../core/step/idempotency-guard';
import { resolveRetry } from '../core/plan/plan-reader';
import { currentStep } from '../core/step/run-context';
import { serializeLegacyForm, sha256 } from '../core/state/serializer';
import type { StepContext } from '../core/step/step-context';
import { isRecordedError, rebuildError, recordError, type RecordedError } from './recorded-error';
import { describeDifference, firstDifference, outlineOf, type RequestDifference, type RequestOutline } from './request-outline';

/** What {@link durable} does when the recorded response was for another request: fail, or pay for the new one. */
export type RequestChangePolicy = 'error' | 'rerun';

/** What a thrown error of a {@link durable} call is: its recorded outcome, or a failure to run again. */
export type ErrorPolicy = 'record' | 'rerun';

/** Options of {@link durable}. */
export interface DurableCallOptions {
  /**
   * What is being asked (prompt, model, parameters). Its SHA-256 is recorded with the response, so a
   * changed prompt after a code change is noticed instead of being answered with the old response.
   * Without it, the call is identified by its name and ordinal only.
   */
  request?: unknown;
  /** Default 'error' (DurableRequestChangedError); 'rerun' makes the call again and records that response too. */
  onRequestChange?: RequestChangePolicy;
  /** Retries of a failing call, as for `@SideEffect` (e.g. `{ maxAttempts: 3, initialDelayMs: 500 }`). */
  retries?: SideEffectOptions['retries'];
  /**
   * What an error thrown by the call is. 'rerun' (default): a failure, not recorded; the next attempt of
   * the step or a resume calls again. 'record': the call's outcome, recorded like a response; a resume
   * throws it again (same name, message, `String(error)` and primitive fields such as `code`) without
   * calling. Record when the step catches the error and goes on, so that what it did next (a prompt that
   * carries the error) is what it does on every resume; leave 'rerun' when the error fails the step, or
   * every retry and resume would fail with the recorded error. A function decides per error. Never
   * recorded, whatever this says: Waypoint's own errors (lease lost, shutdown, request changed...),
   * abort and timeout errors, and any error once the step's signal is aborted: the call was stopped, not
   * answered. With `retries`, only the last attempt's error is recorded.
   */
  onError?: ErrorPolicy | ((error: unknown) => ErrorPolicy);
}

/** Options `waypoint/ai` passes besides the public ones. */
export interface DurableCallInternals extends DurableCallOptions {
  /** Words for a changed request (the default names the request's keys and indexes). */
  describeChange?: (difference: RequestDifference) => string;
}

/**
 * A recorded outcome, with the hash of the request that produced it and its outline (which part of the
 * request is which, to explain a change). Records of the previous release have neither outline nor
 * `thrown`; a failed call was never recorded then (its operation is marked failed and runs again).
 */
interface Recorded<T> {
  requestHash: string;
  response?: T;
  thrown?: RecordedError;
  outline?: RequestOutline;
}

/**
 * The response recorded for a call was produced by a different request: the prompt or parameters changed
 * since (typically a code change before a resume). Not retried: the same step would hit it again. Code
 * `DURABLE_REQUEST_CHANGED`; `difference` says what differs when the record tells (records written
 * before outlines were stored do not).
 */
export class DurableRequestChangedError extends NonRetryableError {
  // A NonRetryableError (so the step fails at once) with a code of its own.
  override readonly code: WaypointErrorCode = 'DURABLE_REQUEST_CHANGED';
  override readonly runId: string;
  override readonly step: string;
  readonly call: string;
  readonly recordedHash: string;
  readonly requestHash: string;
  readonly difference: string | undefined;

  constructor(runId: string, step: string, call: string, recordedHash: string, requestHash: string, difference?: string) {
    super(
      `Call '${call}' in step '${step}' of run '${runId}' has a recorded response for a different request ` +
        `(recorded request sha256 ${recordedHash.slice(0, 12)}, now ${requestHash.slice(0, 12)}): ${difference ?? 'its prompt or parameters changed since it ran'}. ` +
        `If the code changed, revert the change to reuse the recorded response. If it did not, something in the request changes by itself: a clock or ` +
        `a random id (keep them out of requests), or an earlier call that ran again and answered otherwise (record its errors with onError: 'record'). ` +
        `Pass { onRequestChange: 'rerun' } to pay for the new request, or start a new run.`,
    );
    this.runId = runId;
    this.step = step;
    this.call = call;
    this.recordedHash = recordedHash;
    this.requestHash = requestHash;
    this.difference = difference;
  }
}

/**
 * Runs a raw SDK call (an LLM completion, an embedding, a search) at most once per run: its response is
 * recorded in Waypoint's committed-operations log before it is returned, so a resumed run gets the
 * recorded response and never pays for the call again. Calls are told apart by name and by order within
 * the step (the second `durable(ctx, 'draft', ...)` of a step is another call than the first).
 *
 * With `request`, the SHA-256 of the request is stored next to the response; if a later run of the step
 * asks something else under the same name and position, `onRequestChange` decides: 'error' (default)
 * throws `DurableRequestChangedError` naming run, step, call and the first part of the request that
 * differs (a per-key and per-element digest of the request is stored for this, 8 hex characters each);
 * 'rerun' calls again and records the new response beside the old one. The response must be plain data
 * (JSON values, Date, Map, Set, bytes). A thrown error is not recorded unless `onError: 'record'` says so
 * (then a resume throws it again instead of calling). Must be called inside a running step (else
 * `SideEffectOutsideRunError`).
 *
 * @example
 * const completion = await durable(ctx, 'summarize', (signal) =>
 *   openai.chat.completions.create({ model: 'gpt-4o', messages }, { signal }), { request: { model: 'gpt-4o', messages } });
 * // A lookup whose failure the step reports to the model instead of failing: the error is the outcome.
 * const found = await durable(ctx, 'lookup', () => crm.find(id), { onError: 'record' }).catch((e: Error) => ({ error: e.message }));
 */
export function durable<T>(ctx: StepContext<unknown>, name: string, call: (signal: AbortSignal) => T | Promise<T>, options: DurableCallOptions = {}): Promise<T> {
  return durableCall(ctx, name, call, options);
}

/** `durable()` with the options `waypoint-durable/ai` passes besides the public ones. */
export async function durableCall<T>(ctx: StepContext<unknown>, name: string, call: (signal: AbortSignal) => T | Promise<T>, options: DurableCallInternals = {}): Promise<T> {
  const policy = options.onRequestChange ?? 'error';
  if (policy !== 'error' && policy !== 'rerun') {
    throw new WaypointError('INVALID_OPTIONS', `durable('${name}'): onRequestChange must be 'error' or 'rerun' (got '${String(policy)}').`);
  }
  const onError = options.onError ?? 'rerun';
  if (onError !== 'record' && onError !== 'rerun' && typeof onError !== 'function') {
    throw new WaypointError('INVALID_OPTIONS', `durable('${name}'): onError must be 'record', 'rerun' or a function (got '${String(onError)}').`);
  }
  const step = currentStep();
  if (!step) throw new SideEffectOutsideRunError('durable', name);
  if (step.runId !== ctx.runId || step.agentId !== ctx.agentId || step.stepName !== ctx.stepName) {
    throw new WaypointError(
      'DURABLE_CONTEXT_MISMATCH',
      `durable('${name}') was given the context of step '${ctx.agentId}/${ctx.stepName}' of run '${ctx.runId}' while step '${step.stepKey}' of run '${step.runId}' is running. Pass the running step's own context.`,
      { runId: step.runId, step: step.stepKey },
    );
  }
  // Inside another side effect the call is part of that one, recorded with its result.
  if (step.operation) return call(ctx.signal);

  const counter = `durable:${name}`;
  const ordinal = (step.ordinals.get(counter) ?? 0) + 1;
  step.ordinals.set(counter, ordinal);
  const label = ordinal === 1 ? name : `${name} #${ordinal}`;
  const where = { runId: step.runId, step: step.stepKey, what: `request of call '${label}'` };
  // In the form earlier releases hashed (a hole as null): a call they recorded still matches.
  const requestHash = sha256(serializeLegacyForm(options.request === undefined ? ['durable', name, ordinal] : options.request, where));
  const outline = options.request === undefined ? undefined : outlineOf(options.request);
  const key = `durable:${step.stepKey}:${name}#${ordinal}`;
  const attempt = { ctx, call, onError, retries: options.retries, stamp: { requestHash, ...(outline === undefined ? {} : { outline }) } };

  // A failure that is not recorded gives its ordinal back (unless a later call of the name took one since):
  // a caller that tries again at once (the AI SDK retries a provider's 503 itself) is the same call, so
  // the calls after it keep the ordinals a resume, where the first try succeeds, gives them.
  const release = (error: unknown): never => {
    if (step.ordinals.get(counter) === ordinal) step.ordinals.set(counter, ordinal - 1);
    throw error;
  };
  const first = await runRecorded<T>(key, `durable:${name}`, attempt).catch(release);
  const recordedHash = isRecorded(first.recorded) ? first.recorded.requestHash : 'unknown';
  if (recordedHash === requestHash) return outcome(first);
  if (policy === 'error') {
    const difference = firstDifference(isRecorded(first.recorded) ? first.recorded.outline : undefined, options.request);
    const words = difference === undefined ? undefined : (options.describeChange ?? describeDifference)(difference);
    throw new DurableRequestChangedError(step.runId, step.stepKey, label, recordedHash, requestHash, words);
  }
  // 'rerun': the new request gets a record of its own, so a further resume reuses it (and reverting the
  // change reuses the first one again).
  step.logger.info('request of a durable call changed; calling again', { runId: step.runId, step: step.stepKey, call: label });
  return outcome(await runRecorded<T>(`${key}@${requestHash}`, `durable:${name}`, attempt).catch(release));
}

/**
 * The error a call threw, without the guard's `SideEffectFailedError` around it (which names the run and
 * the operation). What `waypoint/ai` hands the AI SDK: its retry of a provider's 503 looks for its own
 * `APICallError`, and a tool's error becomes text the model reads.
 */
export function ownError(error: unknown): unknown {
  return error instanceof SideEffectFailedError ? error.cause : error;
}

interface Attempt<T> {
  ctx: StepContext<unknown>;
  call: (signal: AbortSignal) => T | Promise<T>;
  onError: NonNullable<DurableCallOptions['onError']>;
  retries: DurableCallOptions['retries'];
  stamp: { requestHash: string; outline?: RequestOutline };
}

/** A record, and the error itself when this process made the call and recorded what it threw. */
interface Run<T> {
  recorded: Recorded<T>;
  thrownHere?: { error: unknown };
}

/** Runs (or reuses) one recorded call: a response, or an error the policy records, becomes its record. */
async function runRecorded<T>(key: string, name: string, attempt: Attempt<T>): Promise<Run<T>> {
  const run: Partial<Run<T>> = {};
  let tries = 0;
  run.recorded = await guardedExecute<Recorded<T>>(
    key,
    async () => {
      tries += 1;
      try {
        return { ...attempt.stamp, response: await attempt.call(attempt.ctx.signal) };
      } catch (error) {
        if (!recordable(error, attempt, tries)) throw error;
        run.thrownHere = { error };
        return { ...attempt.stamp, thrown: recordError(error) };
      }
    },
    { name, retries: attempt.retries },
  );
  return run as Run<T>;
}

/**
 * Whether an error is the call's outcome. Stops are never outcomes: a resume must call again, since the
 * step did not go on with the error (it was stopping). An error that the guard will retry in-process is not
 * recorded yet: the last attempt's is.
 */
function recordable(error: unknown, attempt: Attempt<unknown>, tries: number): boolean {
  if (error instanceof WaypointError || attempt.ctx.signal.aborted || isAbortError(error)) return false;
  const decided = typeof attempt.onError === 'function' ? attempt.onError(error) : attempt.onError;
  if (decided !== 'record') return false;
  const retry = resolveRetry(attempt.retries);
  const retried = tries < retry.maxAttempts && !(error instanceof NonRetryableError) && (retry.retryOn?.(error) ?? true);
  return !retried;
}

function isAbortError(error: unknown): boolean {
  const name = (error as { name?: unknown } | null)?.name;
  return name === 'AbortError' || name === 'TimeoutError';
}

/** The response, or the recorded error thrown again (the original object when this process caught it). */
function outcome<T>(run: Run<T>): T {
  if (run.thrownHere) throw run.thrownHere.error;
  const { thrown } = run.recorded;
  if (thrown !== undefined && isRecordedError(thrown)) throw rebuildError(thrown);
  return run.recorded.response as T;
}

function isRecorded<T>(value: unknown): value is Recorded<T> {
  // An undefined response is stored as an absent key, so only the hash is required.
  return typeof value === 'object' && value !== null && typeof (value as Recorded<T>).requestHash === 'string';
}
