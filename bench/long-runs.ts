import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Agent, loop, Pipeline, Step, type StepContext } from '../src/index';
import { BenchEnvironment, type Backend } from './environment';
import { BenchState, BENCH_INPUT, benchPipeline, type Class, type StepHooks } from './pipeline';
import { ratio, section, type Section } from './report';
import { summarize } from './stats';

/**
 * The `long-runs` group (opt-in: it records 20,000-step runs): how a resume's cost grows with the run.
 * A run is recorded up to 1k / 10k / 20k steps and paused; each resume then runs one new step and pauses
 * again. The figure is the time from the `resume` call to the first new step's start, as a ratio to the
 * 1k run's (flat is the target: a resume that read every row would be ~20x at 20k).
 */

const PAYLOAD = 'x'.repeat(1000);

/** Hooks of the loop pipeline's one step (its iteration counter). */
const loopHooks: StepHooks = {};

class LoopBody extends Agent {
  @Step() tick(ctx: StepContext<BenchState>) {
    const at = (ctx.state.at ?? 0) + 1;
    loopHooks.onStep?.(at);
    return { value: PAYLOAD, at };
  }
}

/** A loop that never stops by itself: the bench pauses it. */
@Pipeline({ name: 'long-loop', version: '1.0.0', state: BenchState, agents: [loop({ until: () => false, maxIterations: 1_000_000 }, LoopBody)] })
export class LongLoop {}

export type LongShape = 'line' | 'loop';

/** Runs until `recorded` steps are recorded, pausing there; returns the time to the first new step of `rounds` resumes (ms). */
export async function resumeSeries(env: BenchEnvironment, backend: Backend, shape: LongShape, recorded: number, rounds: number): Promise<number[]> {
  const bw = await env.waypoint(backend, { name: `long_${shape}_${recorded}` });
  const hooks: StepHooks = shape === 'loop' ? loopHooks : {};
  const pipeline: Class = shape === 'loop' ? LongLoop : benchPipeline({ name: `long_line_${recorded}`, steps: recorded + rounds + 5, payloadBytes: 1000, state: 'flat', hooks });
  const runId = `long-${shape}-${recorded}`;
  let seen = 0;
  let stop = new AbortController();
  let limit = recorded;
  let firstAt = 0;
  hooks.onStep = () => {
    seen += 1;
    if (firstAt === 0) firstAt = performance.now();
    if (seen >= limit) stop.abort('bench: pause');
  };
  const first = await bw.waypoint.run(pipeline, { runId, input: BENCH_INPUT, signal: stop.signal });
  if (first.status !== 'paused') throw new Error(`long run '${runId}' ended ${first.status}`);
  const times: number[] = [];
  for (let i = 0; i < rounds; i++) {
    stop = new AbortController();
    limit = seen + 1;
    firstAt = 0;
    const start = performance.now();
    const result = await bw.waypoint.resume(runId, { signal: stop.signal });
    if (result.status !== 'paused' || firstAt === 0) throw new Error(`resume of '${runId}' ended ${result.status}`);
    times.push(firstAt - start);
  }
  hooks.onStep = undefined;
  await bw.store.deleteRun(runId);
  return times;
}

/** The group: straight line and loop on SQLite and PostgreSQL at 1k / 10k / 20k recorded steps. */
export async function longRunsFigure(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const sizes = options.quick ? [1000, 5000] : [1000, 10_000, 20_000];
  const rounds = options.quick ? 3 : 7;
  const s = section('long-runs', 'Long runs: time to the first new step after a restart', `resume of a paused run, ${rounds} resumes each, median (ms) and ratio to the 1k run`, [
    'backend',
    'shape',
    ...sizes.map((n) => `${n / 1000}k`),
    ...sizes.slice(1).map((n) => `${n / 1000}k / 1k`),
  ]);
  for (const backend of ['sqlite', 'postgres'] as Backend[]) {
    for (const shape of ['line', 'loop'] as LongShape[]) {
      const medians: number[] = [];
      for (const n of sizes) {
        progress(`long-runs: ${backend} ${shape} at ${n} steps`);
        medians.push(summarize(await resumeSeries(env, backend, shape, n, rounds)).median);
      }
      s.rows.push([backend, shape, ...medians.map((m) => `${m.toFixed(1)} ms`), ...medians.slice(1).map((m) => ratio(m / medians[0]))]);
      s.figures[`${backend}_${shape}`] = { sizes, medians };
    }
  }
  s.notes.push('target: ≤ 1.5x at 20k (issue 40); a resume reads the run row, its resume snapshot and the rows after it');
  const heap = await loopHeapPerIteration(env, options.quick ? [500, 2500] : [2000, 10_000], progress);
  s.notes.push(`loop heap kept per iteration (SQLite, heapUsed after gc at ${heap.at.join(' and ')} iterations): ${heap.perIteration.toFixed(0)} B (target ≤ 200 B)`);
  s.figures.loopHeap = heap;
  const decorating = decoratingRatio(options.quick ? 4000 : 20_000);
  s.notes.push(`decorating a ${decorating.steps}-step class / 10 x a ${decorating.steps / 10}-step class: ${ratio(decorating.ratio)} (target ≤ 1.3x; linear)`);
  s.figures.decorating = decorating;
  return s;
}

/** heapUsed after a full gc (the flag is set at run time, so the bench needs no --expose-gc). */
function heapAfterGc(): number {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** Heap a running `loop()` keeps per iteration: heapUsed after gc at two iteration counts of one run, on SQLite (rows off the heap). */
export async function loopHeapPerIteration(
  env: BenchEnvironment,
  at: [number, number],
  progress: (line: string) => void,
): Promise<{ at: number[]; heap: number[]; perIteration: number }> {
  progress(`long-runs: loop heap at ${at.join(' / ')} iterations`);
  const bw = await env.waypoint('sqlite', { name: 'long_loop_heap' });
  const heap: number[] = [];
  const stop = new AbortController();
  loopHooks.onStep = (iteration) => {
    if (iteration === at[0] || iteration === at[1]) heap.push(heapAfterGc());
    if (iteration >= at[1]) stop.abort('bench: enough');
  };
  try {
    await bw.waypoint.run(LongLoop, { runId: 'long-loop-heap', input: BENCH_INPUT, signal: stop.signal });
  } finally {
    loopHooks.onStep = undefined;
  }
  return { at, heap, perIteration: (heap[1] - heap[0]) / (at[1] - at[0]) };
}

/** Time to decorate one class of `steps` @Step methods against 10 classes of a tenth as many (linear: ~1x). */
export function decoratingRatio(steps: number): { steps: number; ratio: number; oneMs: number; tenMs: number } {
  const decorate = (n: number) => {
    const agent = class extends Agent {};
    const start = performance.now();
    for (let i = 0; i < n; i++) {
      const name = `s${i}`;
      Object.defineProperty(agent.prototype, name, { value: () => ({}), writable: true, configurable: true });
      Step()(agent.prototype as object, name, Object.getOwnPropertyDescriptor(agent.prototype, name)!);
    }
    return performance.now() - start;
  };
  const ones: number[] = [];
  const tens: number[] = [];
  for (let round = 0; round < 3; round++) {
    ones.push(decorate(steps));
    let ten = 0;
    for (let c = 0; c < 10; c++) ten += decorate(steps / 10);
    tens.push(ten);
  }
  const oneMs = summarize(ones).median;
  const tenMs = summarize(tens).median;
  return { steps, ratio: oneMs / tenMs, oneMs, tenMs };
}
