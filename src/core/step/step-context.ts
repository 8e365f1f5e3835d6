import type { WaitOptions } from './durable-waits';
import type { Logger } from '../../contract/logger';

/**
 * What a `@Step` method receives. `state` is the validated shared state, frozen: return a partial update
 * instead of changing it. Pass `signal` to anything long (LLM calls, fetches): it aborts on timeout,
 * shutdown, cancellation and lease loss.
 *
 * @example
 * @Step({ timeoutMs: 60_000 })
 * async summarize(ctx: StepContext<AnalysisState>) {
 *   const text = await llm.complete(`summarize ${ctx.state.ticker}`, { signal: ctx.signal });
 *   return { summary: text };
 * }
 */
export interface StepContext<S = Record<string, unknown>> {
  readonly state: Readonly<S>;
  readonly runId: string;
  readonly agentId: string;
  readonly stepName: string;
  /** Index of the step within its agent. */
  readonly stepIndex: number;
  /**
   * Where the step sits in the pipeline (`agentId/stepName` in a straight line; `loop[2]/Validate/runTests`,
   * `forEach(reviews)[17]/FileReviewer/review` under control flow): unique in the run, the same on every
   * re-execution. Side-effect idempotency keys derive from it.
   */
  readonly path: string;
  /** The iteration (from 0) of the innermost `loop` around the step; undefined outside loops. */
  readonly iteration?: number;
  /** The item of the innermost `forEach` around the step (or of the child run); undefined outside one. */
  readonly item?: unknown;
  /** The index of `item` in the forEach's item list. */
  readonly itemIndex?: number;
  /** 1 for the first attempt of this step in this process. */
  readonly attempt: number;
  readonly signal: AbortSignal;
  readonly logger: Logger;
  /** Deterministic key of this step in this run: stable across restarts and attempts. */
  readonly idempotencyKey: string;
  /** Durable sleep: the wake-up time is recorded, so after a restart only the rest is slept. */
  sleep(ms: number): Promise<void>;
  /**
   * Waits for `waypoint.signal(runId, name, payload)` and returns its payload. Until it arrives the run
   * is checkpointed as `waiting` and this executor returns; resume after signalling. `name` follows the
   * rule of `checkSignalName` (1 to 128 characters, no control characters): otherwise the step fails with
   * INVALID_SIGNAL_NAME, without retries.
   */
  waitFor<T = unknown>(name: string, options?: WaitOptions): Promise<T>;
  /**
   * Appends `part` (a JSON value: text deltas, progress, anything a person watching should see) to the
   * run's live stream, which `waypoint.stream(runId)` reads from any process. It does not wait for the
   * store: parts are batched (at most 25 ms or 64 parts) and the step's row waits until its parts are
   * stored, so a recorded step's parts are never lost. The parts of an attempt that is not recorded (it
   * threw, timed out, was paused or lost its lease, or its process died) are retracted. A value that
   * cannot be stored throws `SerializationError`; a part over `liveOutput.maxPartBytes` (64 KiB) or a
   * stream at `liveOutput.maxEventsPerRun` (100,000) throws `StreamLimitError`. See docs/live-output.md.
   *
   * @example
   * for await (const delta of llm.stream(prompt, { signal: ctx.signal })) ctx.emit({ type: 'text-delta', delta });
   */
  emit(part: unknown): void;
}
