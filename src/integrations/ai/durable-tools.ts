import type { ToolSet } from 'ai';
import type { StepContext } from '../../core/step/step-context';
import { durable, ownError, type ErrorPolicy } from '../durable-call';
import type { DurableAiOptions } from './options';
import { emitLive } from './live-parts';

type ExecuteFn = NonNullable<ToolSet[string]['execute']>;

/**
 * Wraps each tool's `execute` so that every tool execution inside the step is a recorded operation: a
 * finished tool call is not run again on resume, its recorded output is returned instead. Calls are keyed
 * by step, tool name and the model's tool call id (which comes from a recorded model response, so it is
 * the same on resume); the input is hashed and checked like a `durable()` request. A tool with side
 * effects gets the operation's idempotency key from `currentOperation().key` (stable across resumes; a
 * kill inside the tool runs it again with the same key). Outputs must be plain data; a tool that streams
 * (returns an async iterable) is recorded with its final output only. Tools without `execute` are kept.
 *
 * A tool that throws is recorded with its error (`onToolError: 'record'`, the default): the SDK shows the
 * error to the model, whose next call carries it, so a resume throws the same error again (same name and
 * message, hence the same tool-error text) instead of running the tool, and the recorded model calls
 * after it still match. The model sees the tool's own error (`Error: upstream 503`), never Waypoint's
 * wrapper. Stops are not recorded: an error once the step or the tool's abort signal was aborted (a
 * shutdown, a timeout, a lost lease) runs the tool again on resume.
 *
 * @example
 * const sendMail = tool({
 *   inputSchema: jsonSchema<{ to: string }>({ type: 'object', properties: { to: { type: 'string' } } }),
 *   execute: async ({ to }) => mailer.send(to, { idempotencyKey: currentOperation().key }),
 * });
 * await generateText({ model: durableModel(ctx, model), tools: durableTools(ctx, { sendMail }), prompt });
 */
export function durableTools<TOOLS extends ToolSet>(ctx: StepContext<unknown>, tools: TOOLS, options: DurableAiOptions = {}): TOOLS {
  const wrapped: Record<string, ToolSet[string]> = {};
  for (const [toolName, tool] of Object.entries(tools)) {
    const execute = tool.execute as ExecuteFn | undefined;
    if (typeof execute !== 'function') {
      wrapped[toolName] = tool;
      continue;
    }
    const durableExecute: ExecuteFn = async (input: unknown, execution) => {
      const policy = options.onToolError ?? 'record';
      // The SDK's abort signal for the tool (the caller's, with its tool timeout): an error once it fired
      // is a stop, never the tool's answer.
      const onError = (error: unknown): ErrorPolicy => (execution.abortSignal?.aborted ? 'rerun' : typeof policy === 'function' ? policy(error) : policy);
      // Live output: the input when the tool starts, its output or error when it ends; a replayed call emits both again.
      const { toolCallId } = execution;
      const emit = options.emit === false ? () => undefined : (part: Record<string, unknown>) => emitLive(ctx, { toolCallId, toolName, ...part });
      let started = false;
      const start = () => {
        if (!started) emit({ type: 'tool-input', input });
        started = true;
      };
      try {
        const output = await durable(
          ctx,
          `ai:tool:${toolName}:${toolCallId}`,
          () => {
            start();
            return finalOutput(execute(input, execution));
          },
          { request: { tool: toolName, input }, onRequestChange: options.onRequestChange, onError },
        );
        start();
        emit({ type: 'tool-output', output });
        return output;
      } catch (error) {
        start();
        emit({ type: 'tool-error', error: String(ownError(error)) });
        // The SDK shows `String(error)` to the model: the tool's own error, never Waypoint's wrapper (which
        // names the run and the operation, and would make the prompt differ between runs).
        throw ownError(error);
      }
    };
    wrapped[toolName] = { ...tool, execute: durableExecute };
  }
  return wrapped as TOOLS;
}

/** The output of an execute call: awaited, or the last value of a streaming (async iterable) tool. */
async function finalOutput(result: unknown): Promise<unknown> {
  if (typeof result === 'object' && result !== null && Symbol.asyncIterator in result) {
    let last: unknown;
    for await (const value of result as AsyncIterable<unknown>) last = value;
    return last;
  }
  return await result;
}
