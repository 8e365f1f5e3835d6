import type { ErrorPolicy, RequestChangePolicy } from '../durable-call';

/** Options of `durableModel` and `durableTools`. */
export interface DurableAiOptions {
  /**
   * What a resume does when a recorded call was made for another request (the prompt, the tool set, the
   * model or a tool's input changed since, typically by a code change): 'error' (default) fails the step
   * with `DurableRequestChangedError` (code `DURABLE_REQUEST_CHANGED`); 'rerun' pays for the new call and
   * records it beside the old one. Give both wrappers of a step the same policy: a re-run model call may
   * ask for other tool inputs.
   */
  onRequestChange?: RequestChangePolicy;
  /**
   * `durableModel` only: names this model's calls apart from the step's other models. Needed only when
   * two models of one step are called concurrently (their call order, hence their ordinals, could differ
   * between runs); sequential calls are told apart by their order.
   */
  name?: string;
  /**
   * `durableTools` only: what a tool's thrown error is. 'record' (default): the tool call's outcome; the
   * model saw it and went on, so a resume throws it again without running the tool, and the model calls
   * recorded after it still match. 'rerun': a resume runs the tool again (its later model calls then
   * match only if the tool fails the same way). A function decides per error. Aborts and timeouts, and
   * Waypoint's own errors, are never recorded. Model calls that fail are never recorded: the SDK's loop
   * stops there, and a resume calls again.
   */
  onToolError?: ErrorPolicy | ((error: unknown) => ErrorPolicy);
  /**
   * Emit to the run's live stream (`ctx.emit`, docs/live-output.md). Default true: `durableModel`'s
   * `streamText` / `streamObject` calls emit the model's stream parts as they arrive (text and reasoning
   * deltas, tool calls, finish), as the AI SDK gives them (`{ type: 'text-delta', id, delta }`, ...);
   * `durableTools` emits `{ type: 'tool-input' | 'tool-output' | 'tool-error', toolCallId, toolName, ... }`.
   * A call replayed from the log emits its recorded parts again: the attempt that first emitted them was
   * retracted (it was not recorded), so this attempt's parts are what a reader keeps. `false` emits nothing.
   */
  emit?: boolean;
}
