import { NonRetryableError, SideEffectOutsideRunError, WaypointError } from '../contract/errors';
import type { SideEffectOptions } from '../decorators/options';
import { guardedExecute } from '../core/idempotency-guard';
import { currentStep } from '../core/run-context';
import { serialize, sha256 } from '../core/serializer';
import type { StepContext } from '../core/step-context';

/** What {@link durable} does when the recorded response was for another request: fail, or pay for the new one. */
export type RequestChangePolicy = 'error' | 'rerun';

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
}

/** A recorded response, with the hash of the request that produced it. */
interface Recorded<T> {
  requestHash: string;
  response: T;
}

/**
 * The response recorded for a call was produced by a different request: the prompt or parameters changed
 * since (typically a code change before a resume). Not retried: the same step would hit it again. Code
 * `DURABLE_REQUEST_CHANGED`.
 */
export class DurableRequestChangedError extends NonRetryableError {
  // A NonRetryableError (so the step fails at once) with a code of its own.
  override readonly code: string = 'DURABLE_REQUEST_CHANGED';
  override readonly runId: string;
  override readonly step: string;
  readonly call: string;
  readonly recordedHash: string;
  readonly requestHash: string;

  constructor(runId: string, step: string, call: string, recordedHash: string, requestHash: string) {
    super(
      `Call '${call}' in step '${step}' of run '${runId}' has a recorded response for a different request ` +
        `(recorded request sha256 ${recordedHash.slice(0, 12)}, now ${requestHash.slice(0, 12)}): its prompt or parameters changed since it ran. ` +
        `Revert the change to reuse the recorded response, pass { onRequestChange: 'rerun' } to pay for the new request, or start a new run.`,
    );
    this.runId = runId;
    this.step = step;
    this.call = call;
    this.recordedHash = recordedHash;
    this.requestHash = requestHash;
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
 * throws `DurableRequestChangedError` naming run, step and call; 'rerun' calls again and records the new
 * response beside the old one. The response must be plain data (JSON values, Date, Map, Set, bytes).
 * Must be called inside a running step (else `SideEffectOutsideRunError`).
 *
 * @example
 * const completion = await durable(ctx, 'summarize', (signal) =>
 *   openai.chat.completions.create({ model: 'gpt-4o', messages }, { signal }), { request: { model: 'gpt-4o', messages } });
 */
export async function durable<T>(ctx: StepContext<unknown>, name: string, call: (signal: AbortSignal) => T | Promise<T>, options: DurableCallOptions = {}): Promise<T> {
  const policy = options.onRequestChange ?? 'error';
  if (policy !== 'error' && policy !== 'rerun') {
    throw new WaypointError('INVALID_OPTIONS', `durable('${name}'): onRequestChange must be 'error' or 'rerun' (got '${String(policy)}').`);
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
  const requestHash = sha256(serialize(options.request === undefined ? ['durable', name, ordinal] : options.request, where));
  const key = `durable:${step.stepKey}:${name}#${ordinal}`;
  const guarded = { name: `durable:${name}`, retries: options.retries };

  const recorded = await guardedExecute<Recorded<T>>(key, async () => ({ requestHash, response: await call(ctx.signal) }), guarded);
  const recordedHash = isRecorded(recorded) ? recorded.requestHash : 'unknown';
  if (recordedHash === requestHash) return recorded.response;
  if (policy === 'error') throw new DurableRequestChangedError(step.runId, step.stepKey, label, recordedHash, requestHash);
  // 'rerun': the new request gets a record of its own, so a further resume reuses it (and reverting the
  // change reuses the first one again).
  step.logger.info('request of a durable call changed; calling again', { runId: step.runId, step: step.stepKey, call: label });
  const rerun = await guardedExecute<Recorded<T>>(`${key}@${requestHash}`, async () => ({ requestHash, response: await call(ctx.signal) }), guarded);
  return rerun.response;
}

function isRecorded<T>(value: unknown): value is Recorded<T> {
  // An undefined response is stored as an absent key, so only the hash is required.
  return typeof value === 'object' && value !== null && typeof (value as Recorded<T>).requestHash === 'string';
}
