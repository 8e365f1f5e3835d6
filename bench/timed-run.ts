import type { BenchWaypoint } from './environment';
import { diffCounts, totalOf, type PgStatementCounter } from './instruments';
import { BENCH_INPUT, type Class, type StepHooks } from './pipeline';

/** What one measured run yields. */
export interface RunMeasurement {
  /** Steady-state cost of one step: time between the starts of the first and last steps / (steps - 1). */
  perStepUs: number;
  /** Store calls per step in that steady-state window, by method. */
  callsPerStep: Record<string, number>;
  /** PostgreSQL statements per step in the window (0 when not counted). */
  statementsPerStep: number;
  /** Store calls of the run call outside the step loop (start, lease, load, finish). */
  fixedCalls: Record<string, number>;
  /** Wall time of the whole `run` call, µs. */
  totalUs: number;
}

let runs = 0;

/** A run id unique in this process. */
export function nextRunId(label: string): string {
  runs += 1;
  return `${label}-${runs}`;
}

/**
 * Runs a fresh run of `steps` steps to completion and measures its steady state from the step hooks
 * (so run start and finish are not smeared into the per-step figure; they are reported as fixed calls).
 *
 * @example
 * const m = await timedRun(bw, pipeline, hooks, 200, pg);
 * m.perStepUs; m.callsPerStep.appendStep // 1
 */
export async function timedRun(bw: BenchWaypoint, pipeline: Class, hooks: StepHooks, steps: number, pg?: PgStatementCounter): Promise<RunMeasurement> {
  if (steps < 3) throw new Error('timedRun needs at least 3 steps');
  const last = steps - 1;
  let t0 = 0;
  let t1 = 0;
  let c0: Record<string, number> = {};
  let c1: Record<string, number> = {};
  let s0 = 0;
  let s1 = 0;
  hooks.onStep = (index) => {
    if (index === 0) {
      t0 = performance.now();
      c0 = bw.calls.snapshot();
      s0 = pg?.total ?? 0;
    } else if (index === last) {
      t1 = performance.now();
      c1 = bw.calls.snapshot();
      s1 = pg?.total ?? 0;
    }
  };
  const before = bw.calls.snapshot();
  if (pg) pg.active = true;
  const start = performance.now();
  let result;
  const runId = nextRunId('seq');
  try {
    result = await bw.waypoint.run(pipeline, { runId, input: BENCH_INPUT });
  } finally {
    if (pg) pg.active = false;
    hooks.onStep = undefined;
  }
  const totalUs = (performance.now() - start) * 1000;
  if (result.status !== 'completed' || result.stepsExecuted !== steps) {
    throw new Error(`bench run ended ${result.status} after ${result.stepsExecuted} of ${steps} steps`);
  }
  const window = last;
  const inWindow = diffCounts(c1, c0);
  const callsPerStep = Object.fromEntries(Object.entries(inWindow).map(([k, v]) => [k, v / window]));
  const all = diffCounts(bw.calls.snapshot(), before);
  // The window covers steps 0..last-1; the last step's own calls are one more step's worth.
  const fixedCalls = diffCounts(all, Object.fromEntries(Object.entries(callsPerStep).map(([k, v]) => [k, Math.round(v * steps)])));
  await bw.forget(runId);
  return { perStepUs: ((t1 - t0) * 1000) / window, callsPerStep, statementsPerStep: (s1 - s0) / window, fixedCalls, totalUs };
}

/** "appendStep 1, getOperation 1" (methods with a per-step rate of at least 0.005). */
export function describeCalls(perStep: Record<string, number>): string {
  const parts = Object.entries(perStep)
    .filter(([, v]) => v >= 0.005)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k} ${Number.isInteger(v) ? v : v.toFixed(2)}`);
  return parts.length ? parts.join(', ') : '—';
}

export { totalOf };

/**
 * Runs each measure once per round, rotating their order every round so the floor and the measured
 * thing see the same machine noise and neither is always first. Warm-up rounds are run and discarded.
 * Returns the samples of each measure.
 *
 * @example
 * const s = await interleave(7, { floor: () => floor.batch(200, p), waypoint: async () => (await timedRun(...)).perStepUs });
 */
export async function interleave<K extends string>(rounds: number, measures: Record<K, () => Promise<number>>, warmup = 1): Promise<Record<K, number[]>> {
  const keys = Object.keys(measures) as K[];
  const samples = Object.fromEntries(keys.map((k) => [k, [] as number[]])) as Record<K, number[]>;
  for (let round = -warmup; round < rounds; round++) {
    const offset = ((round % keys.length) + keys.length) % keys.length;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[(i + offset) % keys.length];
      const value = await measures[key]();
      if (round >= 0) samples[key].push(value);
    }
  }
  return samples;
}
