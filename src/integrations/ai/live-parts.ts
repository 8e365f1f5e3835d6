import type { StepContext } from '../../core/step/step-context';
import { describeError } from '../../contract/errors';
import { currentStep } from '../../core/step/run-context';

/**
 * Emits `part` to the run's live stream for `durableModel` / `durableTools` (docs/live-output.md). Live
 * output must never fail a model call: a part the stream refuses (a value that cannot be stored, a part
 * over `liveOutput.maxPartBytes`, a stream at its event limit) is skipped, with a warning.
 *
 * @example
 * emitLive(ctx, { type: 'tool-input', toolCallId, toolName, input });
 */
export function emitLive(ctx: StepContext<unknown>, part: unknown): void {
  try {
    ctx.emit(part);
  } catch (error) {
    currentStep()?.logger.warn('model stream part not emitted', { error: describeError(error), type: (part as { type?: unknown }).type });
  }
}
