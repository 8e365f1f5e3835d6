/**
 * What the runtime reports about its work, bound as `TOKENS.Telemetry`. Metrics (prom-client),
 * traces (OpenTelemetry) and anything else implement these hooks; the default does nothing, so an
 * unobserved run pays one empty call per event.
 *
 * @example
 * container.bind(TOKENS.Telemetry).toConstantValue(new PrometheusTelemetry(registry));
 */
export interface Telemetry {
  /**
   * A run call started executing; `skipped` steps were restored from checkpoints in `restoreMs`
   * (`restoredSteps` lists those with a stored row: step key and sequence).
   */
  runStarted(event: { runId: string; pipeline: string; resumed: boolean; skipped: number; restoreMs: number; restoredSteps?: { step: string; sequence: number }[] }): void;
  /** A step completed and its checkpoint is durable. */
  stepCompleted(event: StepEvent & { attempt: number; durationMs: number; checkpointMs: number; bytes: number }): void;
  /** A step attempt failed (it may be retried). */
  stepFailed(event: StepEvent & { attempt: number; error: unknown; willRetry: boolean }): void;
  /** A side effect ran, was reused from the log, was reconciled, or failed. */
  sideEffect(event: { runId: string; step: string; operation: string; outcome: 'executed' | 'reused' | 'reconciled' | 'failed' }): void;
  /** The run call ended with this status (`completed`, `paused`, `waiting`, `failed`, `cancelled`). */
  runEnded(event: { runId: string; pipeline: string; status: string; stepsExecuted: number }): void;
  leaseLost(event: { runId: string; epoch: number }): void;
  /**
   * A recorded model call (`waypoint/ai`) was made (`executed`, its tokens spent) or answered from the log
   * (`reused`, its tokens saved). Optional: telemetry that does not count tokens leaves it out.
   */
  modelCall?(event: ModelCallEvent): void;
  /** Runs `fn` inside a trace span; implementations without tracing just call it. */
  span<T>(name: string, attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T>;
}

export interface StepEvent {
  runId: string;
  pipeline: string;
  step: string;
  sequence: number;
  backend: string;
}

/** A model call of a step with its token usage (counts the provider did not report are 0). */
export interface ModelCallEvent {
  runId: string;
  step: string;
  outcome: 'executed' | 'reused';
  inputTokens: number;
  outputTokens: number;
}
