import { wrapLanguageModel, type LanguageModelMiddleware } from 'ai';
import { WaypointError } from '../../contract/errors';
import { currentStep, type ActiveStep } from '../../core/step/run-context';
import type { StepContext } from '../../core/step/step-context';
import { describeValue } from '../../core/flow/flow-scope';
import { durableCall, ownError } from '../durable-call';
import { excerpt, type RequestDifference } from '../request-outline';
import type { DurableAiOptions } from './options';
import { tokensOfRecord } from './usage';
import { emitLive } from './live-parts';

type WrapGenerateArgs = Parameters<NonNullable<LanguageModelMiddleware['wrapGenerate']>>[0];
type WrapStreamArgs = Parameters<NonNullable<LanguageModelMiddleware['wrapStream']>>[0];
type GenerateResult = Awaited<ReturnType<WrapGenerateArgs['doGenerate']>>;
type StreamResult = Awaited<ReturnType<WrapStreamArgs['doStream']>>;
type StreamPart = StreamResult['stream'] extends ReadableStream<infer P> ? P : never;
type CallOptions = WrapGenerateArgs['params'];

/** A model `durableModel` accepts: any provider model object (`openai('gpt-4.1')`, a mock from `ai/test`). */
export type WrappableModel = Parameters<typeof wrapLanguageModel>[0]['model'];
/** What `durableModel` returns: an AI SDK language model, for `generateText`, `streamText`, agents. */
export type DurableLanguageModel = ReturnType<typeof wrapLanguageModel>;

/** What is stored per model call: the provider's result (without raw HTTP bodies), or the stream's parts. */
export type RecordedModelCall = { kind: 'generate'; result: GenerateResult } | { kind: 'stream'; parts: StreamPart[] };

/**
 * Wraps an AI SDK model so that every call of it inside the step is a recorded operation: the first run
 * pays for the call and records the provider's result (content, tool calls, finish reason, token usage)
 * in the run's operations log; a resumed run gets the recorded result and the provider is not called
 * again. A `streamText` call is recorded part by part while it streams and replayed as a stream of the
 * same parts. Calls are keyed by step and call ordinal (as `durable()` keys them); the request (provider,
 * model id, prompt with the tool results so far, tools, settings) is hashed, so a prompt, tool set or model
 * changed between crash and resume fails with `DurableRequestChangedError`, or is paid for again with
 * `{ onRequestChange: 'rerun' }`; the error names what differs (the model, the tools, a setting, or the
 * first differing prompt message). A call that fails is not recorded: the SDK gets the provider's own
 * error (so its retry of a 503 works) and a retry or resume calls again in the same place of the log.
 * Built on the SDK's `wrapLanguageModel` middleware.
 *
 * @example
 * @Step() async research(ctx: StepContext<ResearchState>) {
 *   const r = await generateText({
 *     model: durableModel(ctx, openai('gpt-4.1')),
 *     tools: durableTools(ctx, { search, fetchPage }),
 *     stopWhen: stepCountIs(12),
 *     prompt: `Research ${ctx.state.topic}`,
 *   });
 *   return { answer: r.text };
 * }
 */
export function durableModel(ctx: StepContext<unknown>, model: WrappableModel, options: DurableAiOptions = {}): DurableLanguageModel {
  const call: ModelCalls = {
    ctx,
    name: options.name === undefined ? 'ai:model' : `ai:model:${options.name}`,
    policy: { onRequestChange: options.onRequestChange },
    emit: options.emit !== false,
  };
  return wrapLanguageModel({
    model,
    middleware: {
      specificationVersion: 'v4',
      wrapGenerate: (args) => durableGenerate(call, args),
      wrapStream: (args) => durableStream(call, args),
    },
  });
}

/** What every call of one durable model shares: the step's context, the operation name, the request-change policy. */
interface ModelCalls {
  ctx: StepContext<unknown>;
  name: string;
  policy: Pick<DurableAiOptions, 'onRequestChange'>;
  /** Streamed calls emit their parts to the run's live stream. */
  emit: boolean;
}

/** A `generateText` call: the recorded result, or the provider's, recorded. */
async function durableGenerate(call: ModelCalls, { doGenerate, params, model: inner }: WrapGenerateArgs): Promise<GenerateResult> {
  const step = currentStep();
  let executed = false;
  const recorded = await durableCall<RecordedModelCall>(
    call.ctx,
    call.name,
    async () => {
      executed = true;
      return { kind: 'generate', result: storable(await doGenerate()) };
    },
    { ...call.policy, request: requestOf('generate', inner, params), describeChange },
  ).catch((error: unknown) => {
    // The provider's own error, so the SDK's retry (of an APICallError marked retryable) sees it.
    throw ownError(error);
  });
  report(step, executed, recorded);
  if (recorded.kind !== 'generate') throw mismatch(step, 'a stream', 'a generate call');
  return recorded.result;
}
/**
 * A `streamText` call: the stream the caller reads. Its parts are passed on live while they are recorded,
 * or replayed from the record on a resume.
 */
function durableStream(call: ModelCalls, { doStream, params, model: inner }: WrapStreamArgs): Promise<StreamResult> {
  const step = currentStep();
  const seen = { executed: false, passedError: false };
  let out!: ReadableStreamDefaultController<StreamPart>;
  const stream = new ReadableStream<StreamPart>({ start: (controller) => void (out = controller) });
  // Started now (not awaited) so the caller reads parts live while they are recorded; the operation
  // commits when the provider's stream ends.
  durableCall<RecordedModelCall>(
    call.ctx,
    call.name,
    async () => {
      seen.executed = true;
      return { kind: 'stream', parts: await recordStream(await doStream(), out, seen, call) };
    },
    { ...call.policy, request: requestOf('stream', inner, params), describeChange },
  )
    .then(
      (recorded) => {
        report(step, seen.executed, recorded);
        if (!seen.executed) {
          if (recorded.kind !== 'stream') throw mismatch(step, 'a generate call', 'a stream');
          for (const part of recorded.parts) {
            out.enqueue(part);
            emitPart(call, part);
          }
        }
        out.close();
      },
      (error: unknown) => {
        // The SDK already saw the error part; closing keeps it from being reported twice.
        if (seen.passedError) out.close();
        else out.error(ownError(error));
      },
    )
    .catch((error: unknown) => {
      try {
        out.error(error);
      } catch {
        // already closed: nothing left to tell the reader
      }
    });
  return Promise.resolve({ stream });
}

/**
 * Passes the provider's stream on to `out` part by part and returns the parts to record. A stream that
 * reported an error throws it (after passing it on: `seen.passedError`), so it is not recorded.
 */
async function recordStream(provider: StreamResult, out: ReadableStreamDefaultController<StreamPart>, seen: { passedError: boolean }, call: ModelCalls): Promise<StreamPart[]> {
  const parts: StreamPart[] = [];
  const reader = provider.stream.getReader();
  let failure: unknown;
  for (;;) {
    const next = await reader.read();
    if (next.done) break;
    out.enqueue(next.value);
    if (next.value.type === 'raw') continue; // provider-specific chunks: not needed to replay
    if (next.value.type === 'error') {
      failure ??= next.value.error;
      seen.passedError = true;
    }
    emitPart(call, next.value);
    parts.push(next.value);
  }
  // A stream that reported an error is not a result to replay: left unrecorded, a resume calls again.
  // plain Error: a non-Error the provider's stream failed with, as an Error; the step's STEP_FAILED carries it as its cause.
  if (failure !== undefined) throw failure instanceof Error ? failure : new Error(`model stream failed: ${describeValue(failure)}`);
  return parts;
}

/** A model stream part to the run's live stream, as it arrives or is replayed (not an error: the call fails, its attempt is retracted). */
function emitPart(call: ModelCalls, part: StreamPart): void {
  if (call.emit && part.type !== 'error' && part.type !== 'raw') emitLive(call.ctx, part);
}

/** The request identity that is hashed: what changes the answer, without per-call transport details. */
function requestOf(call: 'generate' | 'stream', model: { provider: string; modelId: string }, params: CallOptions): unknown {
  const { abortSignal: _signal, headers: _headers, ...rest } = params;
  return { call, provider: model.provider, modelId: model.modelId, params: rest };
}

/**
 * A changed model request in the words of the AI SDK: the model, the tools, a setting, or the first
 * prompt message that differs (its index, role and content now, truncated). The record holds digests
 * only, so what the message was is not shown: the content now, beside the index, is what to look at.
 */
function describeChange(difference: RequestDifference): string {
  const [root, key, index] = difference.path;
  if (root !== 'params') return `the model differs (${String(root)} is now ${excerpt(difference.now, 80)})`;
  if (key === 'prompt' && typeof index === 'number') {
    const counts = difference.counts ? `; the recorded prompt had ${difference.counts.recorded} messages, now ${difference.counts.now}` : '';
    const message = difference.now as { role?: string; content?: unknown } | undefined;
    if (message === undefined) return `prompt message ${index} is gone${counts}`;
    // Only the last messages have a digest each; earlier ones are located to a block.
    if (difference.range) return `a prompt message in ${index}-${difference.range[1]} differs${counts}; now message ${index} (${message.role ?? '?'}): ${excerpt(message.content)}`;
    return `prompt message ${index} (${message.role ?? '?'}) differs${counts}; now: ${excerpt(message.content)}`;
  }
  if (key === 'prompt') return `the prompt differs; now: ${excerpt(difference.now)}`;
  if (key === 'tools') {
    const counts = difference.counts ? ` (${difference.counts.recorded} recorded, ${difference.counts.now} now)` : '';
    const tool = difference.now as { name?: string } | undefined;
    if (typeof index !== 'number') return `the tools differ; now: ${excerpt(difference.now)}`;
    return tool === undefined ? `the tools differ: tool ${index} is gone${counts}` : `the tools differ at tool ${index} '${tool.name ?? '?'}'${counts}`;
  }
  return `setting '${String(key)}' differs; now: ${excerpt(difference.now, 80)}`;
}

/** The result without the raw HTTP request and response bodies (large, and not needed to replay). */
function storable(result: GenerateResult): GenerateResult {
  const { request: _request, response, ...rest } = result;
  if (!response) return rest;
  const { body: _body, ...meta } = response;
  return { ...rest, response: meta };
}

/** Unreachable unless a record was altered: the call kind is part of the hashed request. */
function mismatch(step: ActiveStep | undefined, recorded: string, now: string): WaypointError {
  return new WaypointError(
    'DURABLE_RECORD_MISMATCH',
    `A model call in step '${step?.stepKey ?? '?'}' of run '${step?.runId ?? '?'}' was recorded as ${recorded} but is now ${now}. Start a new run, or revert the change.`,
    { runId: step?.runId, step: step?.stepKey },
  );
}

function report(step: ActiveStep | undefined, executed: boolean, recorded: RecordedModelCall): void {
  if (!step?.telemetry.modelCall) return;
  const tokens = tokensOfRecord(recorded);
  step.telemetry.modelCall({ runId: step.runId, step: step.stepKey, outcome: executed ? 'executed' : 'reused', inputTokens: tokens.input, outputTokens: tokens.output });
}
