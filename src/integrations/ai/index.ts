/**
 * Durable agents on the Vercel AI SDK (`ai`, an optional peer dependency): `durableModel` and
 * `durableTools` make every model call and every tool execution of a step a recorded operation, so a
 * resumed tool loop continues at the turn where it stopped. Imported as `waypoint/ai`; the root entry
 * never loads the SDK.
 *
 * @example
 * import { generateText, stepCountIs } from 'ai';
 * import { durableModel, durableTools } from 'waypoint-durable/ai';
 *
 * const r = await generateText({
 *   model: durableModel(ctx, openai('gpt-4.1')),
 *   tools: durableTools(ctx, { search, fetchPage }),
 *   stopWhen: stepCountIs(12),
 *   prompt: `Research ${ctx.state.topic}`,
 * });
 */
export { durableModel, type DurableLanguageModel, type RecordedModelCall, type WrappableModel } from './durable-model';
export { durableTools } from './durable-tools';
export type { DurableAiOptions } from './options';
export { aiUsageByStep, addUsage, MODEL_OPERATION, TOOL_OPERATION_PREFIX, type AiUsage, type StepAiUsage } from './usage';
export { DurableRequestChangedError, type ErrorPolicy, type RequestChangePolicy } from '../durable-call';
export { currentOperation } from '../../core/step/run-context';
