import { Redis } from 'ioredis';
import type { Backend, BenchEnvironment, BenchWaypoint } from './environment';
import { totalOf, type PgStatementCounter } from './instruments';
import { SilentLogger } from './observers';
import { BENCH_INPUT, benchPipeline, type BenchStateShape, type StepHooks } from './pipeline';
import { bytes, count, ratio, section, us, usSpread, type Section } from './report';
import { summarize, type Summary } from './stats';
import { describeCalls, nextRunId } from './timed-run';
import { measureResume, type ResumeMeasurement } from './resume';
import { storedRowBytes, type RowSize } from './row-bytes';

/**
 * Figures 3 and 4 from one long run per backend and state shape: bytes stored per step at step 10,
 * 1,000 and 2,000 (read from the database), the per-step time at those points, and resume (load + first
 * new step) of the 1,000- and 2,000-step run in round trips and time, beside the time of one step at
 * the same point of the same run.
 */

/** Memory has no stored bytes to read, but shows the runtime's per-step and resume CPU without I/O noise. */
const BACKENDS: Backend[] = ['postgres', 'sqlite', 'redis', 'memory'];
/** 'reducer' (issue 22): a list growing by 1 KB per step through @Reducer; each row holds only its own item. */
const STATES: BenchStateShape[] = ['flat', 'growing', 'reducer'];
/** Issue 22: stored bytes per step for a 1 KB update, at every point. */
const MAX_ROW_BYTES = 1400;
/** Steps whose step-to-step times give the per-step time at a point (median, so a noisy moment does not decide it). */
const WINDOW = 50;

interface Point {
  at: number;
  rowBytes: number;
  outputBytes: number;
  /** With a reducer: the bytes of the step's merge row (what the reducer added), stored after the step row. */
  mergeBytes?: number;
  /** Median of the step-to-step times of the WINDOW steps before the point, µs. */
  stepUs: number;
  resumes: ResumeMeasurement[];
}

async function longRun(
  env: BenchEnvironment,
  bw: BenchWaypoint,
  backend: Backend,
  state: BenchStateShape,
  points: number[],
  resumes: number,
  pg: PgStatementCounter,
  redis: Redis | null,
): Promise<Point[]> {
  const total = points[points.length - 1] + resumes + 1;
  // A step whose update reaches a @Reducer is followed by its merge row: two rows per step.
  const rowsPerStep = state === 'reducer' ? 2 : 1;
  const rowsOf = (k: number) => (rowsPerStep === 2 ? [2 * k - 1, 2 * k] : [k]);
  const hooks: StepHooks = {};
  const pipeline = benchPipeline({ name: `grow_${backend}_${state}`, steps: total, payloadBytes: 1000, state, hooks });
  const runId = nextRunId(`grow-${state}`);
  const starts = new Float64Array(total);
  const out: Point[] = [];
  let done = 0;
  for (const at of points) {
    // Advance the run to exactly `at` recorded steps, then pause it there.
    const stop = new AbortController();
    hooks.onStep = (index) => {
      starts[index] = performance.now();
      if (index === at - 1) stop.abort('bench: pause at the measuring point');
    };
    const result = done === 0 ? await bw.waypoint.run(pipeline, { runId, input: BENCH_INPUT, signal: stop.signal }) : await bw.waypoint.resume(runId, { signal: stop.signal });
    if (result.status !== 'paused' || result.lastSequence !== at * rowsPerStep)
      throw new Error(`long run: expected a pause at row ${at * rowsPerStep} (step ${at}), got ${result.status} at ${result.lastSequence}`);
    const gaps: number[] = [];
    for (let i = Math.max(1, at - WINDOW); i < at; i++) gaps.push((starts[i] - starts[i - 1]) * 1000);
    const measured: ResumeMeasurement[] = [];
    for (let r = 0; r < resumes; r++) measured.push(await measureResume(bw, runId, hooks, backend === 'postgres' ? pg : undefined));
    out.push({ at, stepUs: summarize(gaps).median, resumes: measured, rowBytes: 0, outputBytes: 0 });
    done += 1;
  }
  hooks.onStep = undefined;
  const none = { rowBytes: NaN, outputBytes: NaN };
  const sizes =
    backend === 'memory'
      ? new Map<number, RowSize>()
      : await storedRowBytes(
          bw,
          backend,
          runId,
          [10, ...points].flatMap((k) => rowsOf(k)),
          redis,
          backend === 'redis' ? env.redisPrefix(`grow_${state}`) : '',
        );
  // Step k's own row; with a reducer, the merge row after it (what the reducer added) is reported beside it.
  const sizeAt = (k: number): RowSize & { mergeBytes?: number } => {
    const [stepRow, mergeRow] = rowsOf(k).map((sequence) => sizes.get(sequence));
    return { ...(stepRow ?? none), ...(mergeRow ? { mergeBytes: mergeRow.rowBytes } : {}) };
  };
  const early = { at: 10, ...sizeAt(10), stepUs: NaN, resumes: [] };
  for (const p of out) Object.assign(p, sizeAt(p.at));
  // Step time near step 10 of this same run, from its first steps.
  const firstGaps: number[] = [];
  for (let i = 2; i < 2 + WINDOW; i++) firstGaps.push((starts[i] - starts[i - 1]) * 1000);
  early.stepUs = summarize(firstGaps).median;
  return [early, ...out];
}

/** Figures 3, 3b and 4. @example sections.push(...(await storageFigures(env, { quick: false }, pg, log))); */
export async function storageFigures(env: BenchEnvironment, options: { quick: boolean }, pg: PgStatementCounter, progress: (line: string) => void): Promise<Section[]> {
  const points = options.quick ? [100, 200] : [1000, 2000];
  // A resume of the growing-state run takes the longest (it rebuilds the whole state): 3 of those, 5 of the others.
  const resumesOf = (state: BenchStateShape) => (options.quick || state === 'growing' ? 3 : 5);
  const bytesSection = section(
    'bytes-per-step',
    `Bytes stored per step at step 10 vs ${points.join(' and ')}`,
    'size of the stored step row read back from the database: pg_column_size(row) on PostgreSQL, sum of column byte lengths on SQLite, HSTRLEN of the step entry on Redis',
    ['backend', 'state', 'row @10', ...points.map((p) => `row @${p}`), `@${points[points.length - 1]} / @10`, 'output column', 'target'],
  );
  const timeSection = section(
    'step-time-by-position',
    'Per-step time by step number (same runs)',
    `median of the ${WINDOW} step-to-step times before each point; constant is the goal (no per-step work that grows with the run)`,
    ['backend', 'state', 'µs/step @10', ...points.map((p) => `@${p}`), `@${points[points.length - 1]} / @10`],
  );
  const resumeSection = section(
    'resume',
    `Resume of a ${points.join(' / ')}-step run: load + first new step`,
    `median of ${resumesOf('flat')} (growing state: ${resumesOf('growing')}) resumes at each point (min–max); round trips counted until the first new step is durable; "one step" = median step time just before that point of the same run`,
    ['backend', 'state', 'at step', 'store calls to 1st step', 'PG statements', 'time to 1st step durable', 'one step', 'ratio', 'whole call (+ pause write)', 'round trips'],
  );
  const redis = new Redis(env.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  redis.on('error', () => {}); // unreachable Redis: its rows are reported unavailable
  try {
    await redis.connect();
  } catch {
    redis.disconnect();
  }
  try {
    for (const backend of BACKENDS) {
      for (const state of STATES) {
        progress(`storage/resume: ${backend}, ${state} state, ${points[points.length - 1]} steps`);
        let result: Point[];
        try {
          // Silent: every measured resume ends in a pause, which the default logger reports as a warning.
          const bw = await env.waypoint(backend, { name: `grow_${state}`, logger: new SilentLogger() });
          result = await longRun(env, bw, backend, state, points, resumesOf(state), pg, redis.status === 'ready' ? redis : null);
        } catch (error) {
          bytesSection.rows.push([backend, state, 'unavailable', String((error as Error).message ?? error).slice(0, 100)]);
          continue;
        }
        addRows(backend, state, result, bytesSection, timeSection, resumeSection);
      }
    }
  } finally {
    redis.disconnect();
  }
  bytesSection.notes.push(
    `Target: flat (row @last / row @10 within 5%; a few bytes come from longer step names and ids) and at most ${MAX_ROW_BYTES} B per row for a 1 KB update (issue 22).`,
  );
  resumeSection.notes.unshift(
    'Target: a small constant number of round trips, independent of the run length (not one per step); lease heartbeats during a resume are left out. ' +
      "The calls: the run row, resume snapshot and tail (read for the integrity check before the lease; the restore under it reuses them when the run row shows nothing moved, else reads them again), the lease, the run row again, the status change, the live stream's length and last events (the new execution continues its stream), the first step's append.",
  );
  return [bytesSection, timeSection, resumeSection];
}

function rowTarget(growth: number, largest: number): string {
  const misses: string[] = [];
  if (growth > 1.05) misses.push(`grows ${((growth - 1) * 100).toFixed(0)}%`);
  if (largest > MAX_ROW_BYTES) misses.push(`${largest - MAX_ROW_BYTES} B over ${MAX_ROW_BYTES} B`);
  return misses.length === 0 ? `met (flat, ≤${MAX_ROW_BYTES} B)` : `MISSED: ${misses.join(', ')}`;
}

function addRows(backend: Backend, state: string, points: Point[], bytesSection: Section, timeSection: Section, resumeSection: Section): void {
  const first = points[0];
  const last = points[points.length - 1];
  const growth = last.rowBytes / first.rowBytes;
  if (backend !== 'memory')
    bytesSection.rows.push([
      backend,
      state,
      bytes(first.rowBytes),
      ...points.slice(1).map((p) => bytes(p.rowBytes)),
      ratio(growth),
      bytes(last.outputBytes),
      rowTarget(growth, Math.max(...points.map((p) => p.rowBytes))),
    ]);
  if (backend !== 'memory')
    bytesSection.figures[`${backend}:${state}`] = points.map((p) => ({ at: p.at, rowBytes: p.rowBytes, outputBytes: p.outputBytes, mergeBytes: p.mergeBytes }));
  if (backend !== 'memory' && first.mergeBytes !== undefined)
    bytesSection.notes.push(
      `${backend}, ${state}: each step's merge row (the @Reducer value as what the step added, after the step row): ${points.map((p) => `${bytes(p.mergeBytes ?? NaN)} @${p.at}`).join(', ')}.`,
    );
  timeSection.rows.push([backend, state, us(first.stepUs), ...points.slice(1).map((p) => us(p.stepUs)), ratio(last.stepUs / first.stepUs)]);
  timeSection.figures[`${backend}:${state}`] = points.map((p) => ({ at: p.at, stepUs: p.stepUs }));
  let previous: { at: number; trips: number; us: number } | null = null;
  for (const p of points.slice(1)) {
    const toFirst: Summary = summarize(p.resumes.map((r) => r.toFirstStepUs));
    const whole = summarize(p.resumes.map((r) => r.totalUs));
    // The lease heartbeat may fire during a slow resume: it is not part of the resume's own work.
    const own = p.resumes.map((r) => withoutHeartbeat(r.callsToFirstStep));
    const calls = own.reduce((a, b) => (totalOf(b) < totalOf(a) ? b : a));
    const stmts = p.resumes.map((r) => r.statementsToFirstStep - (r.callsToFirstStep.renewLease ?? 0));
    const trips = totalOf(calls);
    // Judged between the points (the same count at 2x the rows); the first point's count is shown, not judged.
    const constant = previous === null || trips === previous.trips;
    resumeSection.rows.push([
      backend,
      state,
      String(p.at),
      `${trips} (${describeCalls(calls)})`,
      backend === 'postgres' ? count(summarize(stmts).median) : '—',
      usSpread(toFirst),
      us(p.stepUs),
      ratio(toFirst.median / p.stepUs),
      us(whole.median),
      previous === null ? 'first point' : constant ? 'met (constant)' : `MISSED: ${trips} vs ${previous.trips}`,
    ]);
    if (previous) {
      resumeSection.notes.push(
        `${backend}, ${state} state: ${p.at} vs ${previous.at} steps: ${(toFirst.median / previous.us).toFixed(1)}x the time for ${(p.at / previous.at).toFixed(0)}x the rows (2x = linear, 4x = quadratic).`,
      );
    }
    previous = { at: p.at, trips, us: toFirst.median };
    resumeSection.figures[`${backend}:${state}:${p.at}`] = { toFirstStepUs: toFirst, wholeCallUs: whole, stepUs: p.stepUs, callsToFirstStep: calls, statementsToFirstStep: stmts };
  }
}

function withoutHeartbeat(calls: Record<string, number>): Record<string, number> {
  const { renewLease: _heartbeat, ...rest } = calls;
  return rest;
}
