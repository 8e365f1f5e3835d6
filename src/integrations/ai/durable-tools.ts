import type { ToolSet } from 'ai';
import type { StepContext } from '../../core/step-context';
import { durable } from '../durable-call';
import type { DurableAiOptions } from './options';

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
    const durableExecute: ExecuteFn = (input: unknown, execution) =>
      durable(ctx, `ai:tool:${toolName}:${execution.toolCallId}`, () => finalOutput(execute(input, execution)), {
        request: { tool: toolName, input },
        onRequestChange: options.onRequestChange,
      });
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
