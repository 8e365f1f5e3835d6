import { injectable } from 'inversify';
import { generateText } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { Agent, Pipeline, Step, type StepContext } from '../src/index';
import { durableModel } from '../src/entry/ai';
import type { Backend, BenchEnvironment } from './environment';
import { ratioSpread, section, us, usSpread, type Section } from './report';
import { pairedRatio, summarize } from './stats';

/**
 * Figure (issue 24): what recording a model call costs. One step makes `calls` sequential
 * `generateText` calls on a zero-latency mock model from `ai/test`, raw or through `durableModel`
 * (each call then writes its operation record: begin and commit); the time per call is measured inside
 * the step, so run start and checkpoint are outside it. Raw and recorded rounds alternate; the ratio is
 * paired per round. Against a real provider the same absolute overhead is spread over the model's own
 * latency, which the last column puts in proportion (a 500 ms call).
 */
const loop = { durable: false, calls: 0, elapsedMs: 0 };

const mock = new MockLanguageModelV4({
  provider: 'mock',
  modelId: 'bench',
  doGenerate: () =>
    Promise.resolve({
      content: [{ type: 'text', text: 'ok' }],
      finishReason: { unified: 'stop', raw: undefined },
      usage: { inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 2, text: 2, reasoning: undefined } },
      warnings: [],
    }),
});

@injectable()
class Caller extends Agent {
  @Step()
  async calls(ctx: StepContext) {
    const model = loop.durable ? durableModel(ctx, mock) : mock;
    const started = performance.now();
    for (let i = 0; i < loop.calls; i++) await generateText({ model, prompt: `question ${i}` });
    loop.elapsedMs = performance.now() - started;
    return {};
  }
}

@Pipeline({ name: 'bench-ai-calls', version: '1.0.0', agents: [Caller] })
class ModelCalls {}

export async function aiOverheadFigure(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const rounds = options.quick ? 3 : 7;
  const calls = options.quick ? 40 : 100;
  const out = section(
    'ai',
    'Recorded model call (waypoint/ai durableModel) vs raw mock call',
    `${calls} sequential generateText calls in one step on a zero-latency mock model, per call; median of ${rounds} alternating rounds (min–max); ratio paired per round`,
    ['backend', 'raw mock call', 'recorded call', 'ratio', 'overhead per call', 'overhead on a 500 ms call'],
  );
  const figures: Record<string, unknown> = {};
  for (const backend of ['memory', 'sqlite', 'postgres'] as Backend[]) {
    progress(`ai: ${backend}`);
    const { waypoint } = await env.waypoint(backend, { name: `ai_${backend}` });
    const raw: number[] = [];
    const recorded: number[] = [];
    let run = 0;
    const measure = async (durable: boolean) => {
      Object.assign(loop, { durable, calls });
      await waypoint.run(ModelCalls, { runId: `ai-${durable ? 'rec' : 'raw'}-${run++}`, input: {} });
      return (loop.elapsedMs * 1000) / calls;
    };
    for (let w = 0; w < 2; w++) {
      await measure(false); // warm-up: JIT, connections, the SDK's first-call setup
      await measure(true);
    }
    for (let r = 0; r < rounds; r++) {
      raw.push(await measure(false));
      recorded.push(await measure(true));
    }
    const ratio = pairedRatio(recorded, raw);
    const overhead = summarize(recorded.map((v, i) => v - raw[i]));
    out.rows.push([
      backend,
      usSpread(summarize(raw)),
      usSpread(summarize(recorded)),
      ratioSpread(ratio),
      us(overhead.median),
      `${((overhead.median / 500_000) * 100).toFixed(2)}%`,
    ]);
    figures[backend] = { rawUs: summarize(raw), recordedUs: summarize(recorded), ratio, overheadUs: overhead };
  }
  out.figures = figures;
  out.notes.push(
    'The ratio is against a mock that answers instantly, so it is all overhead: the record (a read and two store writes per call) dominates; against a real provider only the absolute overhead counts.',
  );
  return out;
}
