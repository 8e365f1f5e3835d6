import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import * as path from 'node:path';
import { serialize } from '../src/index';
import { BenchEnvironment, type BenchWaypoint } from './environment';
import { PgFloor } from './floors';
import { StoreAppendFloor } from './store-floor';
import { stepWorkFloor } from './step-work-floor';
import { BENCH_INPUT, benchPipeline, type Class, type StepHooks } from './pipeline';
import { cpuProfiled, type CpuProfile } from './profile';
import { realisticPipeline, REALISTIC_WIDTH, type RealisticHooks } from './realistic-pipeline';
import { asyncMeasures, asyncRows } from './realistic-async';
import { ratio, ratioSpread, section, us, usSpread, verdict, type Section } from './report';
import { pairedRatio, summarize, within } from './stats';
import { interleave, nextRunId } from './timed-run';

/**
 * Issue 22: the per-step cost of a pipeline shaped like real ones (bench/realistic-pipeline.ts: 20 agents,
 * a 200-property state class, ~1 KB more state per step, agent memory saved, validation on) beside the
 * flat one, on the memory store (the runtime alone) and PostgreSQL. Each row gives the wall time per step
 * and the node CPU per step (process.cpuUsage user+sys over the same steady window / steps), a growth
 * figure (late steps of a 2,000-step run against early ones) and a CPU profile of the step loop bucketed
 * into serialize / validate / hash / telemetry / store call / the rest.
 */

type Shape = 'flat' | 'realistic';
type Backend = 'memory' | 'postgres';

interface Window {
  wallUs: number;
  cpuUs: number;
}

/**
 * One fresh run to completion; returns, for each [from, to) window of step positions, wall and node CPU
 * per step between the start of step `from` and the start of step `to`.
 */
async function measuredRun(bw: BenchWaypoint, pipeline: Class, hooks: RealisticHooks, steps: number, windows: readonly [number, number][]): Promise<Window[]> {
  const marks = new Map<number, { t: number; cpu: NodeJS.CpuUsage }>();
  const wanted = new Set(windows.flat());
  hooks.onStep = (index) => {
    if (wanted.has(index)) marks.set(index, { t: performance.now(), cpu: process.cpuUsage() });
  };
  let result;
  const runId = nextRunId('real');
  try {
    result = await bw.waypoint.run(pipeline, { runId, input: BENCH_INPUT });
  } finally {
    hooks.onStep = undefined;
  }
  if (result.status !== 'completed' || result.stepsExecuted !== steps)
    throw new Error(`realistic bench run ended ${result.status} after ${result.stepsExecuted} of ${steps} steps`);
  await bw.forget(runId);
  return windows.map(([from, to]) => {
    const a = marks.get(from)!;
    const b = marks.get(to)!;
    const cpu = b.cpu.user - a.cpu.user + (b.cpu.system - a.cpu.system);
    return { wallUs: ((b.t - a.t) * 1000) / (to - from), cpuUs: cpu / (to - from) };
  });
}

function pipelineFor(shape: Shape, name: string, steps: number, hooks: StepHooks): Class {
  return shape === 'flat' ? benchPipeline({ name, steps, payloadBytes: 1000, state: 'flat', hooks, stepsPerAgent: steps / 20 }) : realisticPipeline(name, steps, hooks);
}

/** What the floor inserts: a realistic step's serialized output, as the runtime serializes it. */
function realisticPayload(): string {
  return serialize({ [`f${REALISTIC_WIDTH - 1}`]: `step ${REALISTIC_WIDTH - 1} of agent 19`, [`r${REALISTIC_WIDTH - 1}`]: 'x'.repeat(1000) });
}

/** The `realistic` group: per-step figures, growth and the categorized profile. */
export async function realisticFigures(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section[]> {
  const steps = 200; // 20 agents x 10 steps
  const rounds = options.quick ? 3 : 7;
  const cost = section(
    'realistic',
    'Per-step cost, flat 1 KB state vs the realistic pipeline (20 agents x 10 steps, 200-property state class, +1 KB state / step, agent memory)',
    `median of ${rounds} interleaved rounds (min–max) of ${steps}-step runs; wall = time between step starts / steps; node CPU = process.cpuUsage user+sys over the same window / steps; defaults on (validation, SHA-256, lease renewal, prom-client metrics)`,
    ['case', 'backend', 'wall / step', 'node CPU / step', 'floor', 'ratio (wall / floor)', 'target'],
  );
  for (const backend of ['memory', 'postgres'] as const) {
    progress(`realistic: ${backend}`);
    const bw = await env.waypoint(backend, { name: `real_${backend}` });
    const pipelines = { flat: {} as StepHooks, realistic: {} as StepHooks };
    const flat = pipelineFor('flat', `realflat_${backend}`, steps, pipelines.flat);
    const real = pipelineFor('realistic', `realreal_${backend}`, steps, pipelines.realistic);
    const cpu: Record<Shape, number[]> = { flat: [], realistic: [] };
    const floor = backend === 'postgres' ? await PgFloor.open(env) : null;
    try {
      // The memory store's runs are short: several runs per sample keep the clock's resolution out of it.
      const repeat = backend === 'memory' ? 5 : 1;
      const sample = (shape: Shape, pipeline: Class) => async () => {
        let wall = 0;
        let c = 0;
        for (let i = 0; i < repeat; i++) {
          const [w] = await measuredRun(bw, pipeline, pipelines[shape], steps, [[1, steps - 1]]);
          wall += w.wallUs / repeat;
          c += w.cpuUs / repeat;
        }
        cpu[shape].push(c);
        return wall;
      };
      const measures: Record<string, () => Promise<number>> = { flat: sample('flat', flat), realistic: sample('realistic', real) };
      // Node CPU of the floors too: the raw client's own CPU per INSERT is a bound on what any PostgreSQL step costs the process.
      const floorCpu: Record<'floor' | 'appendOnly', number[]> = { floor: [], appendOnly: [] };
      const withCpu = (sink: number[], measure: () => Promise<number>) => async () => {
        const before = process.cpuUsage();
        const wall = await measure();
        const used = process.cpuUsage(before);
        sink.push((used.user + used.system) / steps);
        return wall;
      };
      if (floor) {
        measures.floor = withCpu(floorCpu.floor, () => floor.batch(steps, realisticPayload()));
        // The store's append with prebuilt rows, no runtime: what the data model costs before any runtime work.
        const appendOnly = new StoreAppendFloor(bw.store, (runId) => bw.forget(runId));
        measures.appendOnly = withCpu(floorCpu.appendOnly, () => appendOnly.batch(steps, realisticPayload()));
        const wallPerStep = async (b: BenchWaypoint, p: Class, h: StepHooks) => (await measuredRun(b, p, h, steps, [[1, steps - 1]]))[0].wallUs;
        Object.assign(measures, await asyncMeasures(env, (shape, name, hooks) => pipelineFor(shape, name, steps, hooks), wallPerStep));
      }
      const samples = await interleave(rounds, measures);
      // interleave's warm-up round pushed CPU samples too.
      for (const shape of ['flat', 'realistic'] as const) cpu[shape].splice(0, cpu[shape].length - rounds);
      for (const sink of Object.values(floorCpu)) sink.splice(0, sink.length - rounds);
      if (floor) {
        const f = summarize(samples.floor);
        const fc = summarize(floorCpu.floor);
        cost.rows.push([`${floor.what} alone (raw pg client, no store)`, backend, usSpread(f), usSpread(fc), '', '1.00x', 'bound: the client alone']);
        cost.figures[`floor:${backend}`] = { wallUs: f, cpuUs: fc };
        const a = summarize(samples.appendOnly);
        const ac = summarize(floorCpu.appendOnly);
        const r = pairedRatio(samples.appendOnly, samples.floor);
        cost.rows.push(['store.appendStep alone (no runtime)', backend, usSpread(a), usSpread(ac), '', ratioSpread(r), 'breakdown']);
        cost.figures[`appendOnly:${backend}`] = { wallUs: a, cpuUs: ac, ratio: r };
      } else {
        // The memory store's bound: the work a step cannot skip, measured with no runtime around it.
        const work = summarize(Array.from({ length: rounds }, () => stepWorkFloor(2000)));
        cost.rows.push(['step work alone: serialize + validate 1 property + SHA-256 + UUID (no runtime)', backend, '', usSpread(work), 'none', '—', 'bound']);
        cost.figures[`stepWork:${backend}`] = { cpuUs: work };
      }
      for (const shape of ['flat', 'realistic'] as const) {
        const wall = summarize(samples[shape]);
        const c = summarize(cpu[shape]);
        const figure: Record<string, unknown> = { wallUs: wall, cpuUs: c };
        if (floor) {
          const f = summarize(samples.floor);
          const r = pairedRatio(samples[shape], samples.floor);
          const v = within(r.median, 1.25);
          cost.rows.push([shape, backend, usSpread(wall), usSpread(c), `${floor.what} ${us(f.median)}`, ratioSpread(r), verdict(v)]);
          Object.assign(figure, { floorUs: f, ratio: r, target: 1.25, met: v.met, missedBy: v.missedBy });
        } else if (shape === 'realistic') {
          const met = wall.median <= 25;
          cost.rows.push([
            shape,
            backend,
            usSpread(wall),
            usSpread(c),
            'none (runtime alone)',
            '—',
            met ? 'met (≤25 µs)' : `MISSED (≤25 µs) by ${((wall.median / 25 - 1) * 100).toFixed(1)}%`,
          ]);
          Object.assign(figure, { targetUs: 25, met });
        } else {
          cost.rows.push([shape, backend, usSpread(wall), usSpread(c), 'none (runtime alone)', '—', 'no target']);
        }
        cost.figures[`${shape}:${backend}`] = figure;
      }
      if (floor) asyncRows(cost, samples, floor.what);
    } finally {
      await floor?.close();
    }
  }
  cost.rows.push(...(await growthRows(env, options, progress, cost)));
  cost.notes.push(
    "Memory store: wall per step is the runtime's own cost (no I/O); PostgreSQL: the floor is one raw single-row INSERT commit of a realistic step's payload (bench/floors.ts).",
  );
  const profile = await categoryProfile(options, progress);
  return [cost, profile];
}

/** Step ~2,000 against step ~10 of the same 2,000-step realistic run: per-step cost must not grow with the state. */
async function growthRows(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void, cost: Section): Promise<string[][]> {
  const steps = options.quick ? 1000 : 2000;
  // Memory-store runs are short: more rounds for the same noise.
  const roundsOf = (backend: Backend) => (backend === 'memory' ? 7 : 5);
  // Not the first steps of a run: they also pay for collecting the previous run's state (GC), which is no per-step cost.
  // Windows of 200 steps: one of 50 lasted about 35 ms on PostgreSQL, so a single GC pause, lease renewal
  // (every 250 ms) or autovacuum wake-up in either window decided the ratio.
  const early: [number, number] = [100, 300];
  const late: [number, number] = [steps - 201, steps - 1];
  const rows: string[][] = [];
  for (const backend of ['memory', 'postgres'] as const) {
    progress(`realistic: growth on ${backend}, ${steps} steps`);
    const bw = await env.waypoint(backend, { name: `realgrow_${backend}` });
    const hooks: RealisticHooks = {};
    const pipeline = realisticPipeline(`realgrow_${backend}`, steps, hooks);
    const wallRatios: number[] = [];
    const cpuRatios: number[] = [];
    const lateWall: number[] = [];
    const lateCpu: number[] = [];
    for (let round = -1; round < roundsOf(backend); round++) {
      const [e, l] = await measuredRun(bw, pipeline, hooks, steps, [early, late]);
      if (round < 0) continue; // warm-up
      wallRatios.push(l.wallUs / e.wallUs);
      cpuRatios.push(l.cpuUs / e.cpuUs);
      lateWall.push(l.wallUs);
      lateCpu.push(l.cpuUs);
    }
    const r = summarize(wallRatios);
    const v = within(r.median, 1.1);
    rows.push([
      `growth: steps ${late[0]}–${late[1]} / ${early[0]}–${early[1]}`,
      backend,
      usSpread(summarize(lateWall)),
      usSpread(summarize(lateCpu)),
      `CPU ratio ${ratio(summarize(cpuRatios).median)}`,
      ratioSpread(r),
      verdict(v),
    ]);
    cost.figures[`growth:${backend}`] = {
      steps,
      wallRatio: r,
      cpuRatio: summarize(cpuRatios),
      lateWallUs: summarize(lateWall),
      lateCpuUs: summarize(lateCpu),
      target: 1.1,
      met: v.met,
    };
  }
  return rows;
}

// ---- profile: where the per-step CPU goes ----

const CATEGORIES = ['serialize', 'validate', 'hash', 'telemetry', 'store call', 'merge state', 'runtime (rest)', 'gc / V8'] as const;
type Category = (typeof CATEGORIES)[number];

/** The category of one profile frame, or null when it says nothing (a native or node-internal frame: its caller decides). */
function categoryOf(frame: { functionName: string; url: string }): Category | null {
  const { url, functionName: fn } = frame;
  if (fn === '(garbage collector)' || fn === '(program)') return 'gc / V8';
  if (!url) return null;
  if (url.includes('/node_modules/class-validator/') || url.includes('/node_modules/class-transformer/')) return 'validate';
  if (url.includes('/node_modules/prom-client/') || url.includes('/src/core/ports/telemetry') || url.includes('/bench/observers')) return 'telemetry';
  if (url.includes('/node_modules/pg') || url.includes('/src/storage/') || url.includes('/bench/instruments')) return 'store call';
  if (url.includes('/src/core/state/serializer')) return fn === 'sha256' ? 'hash' : 'serialize';
  if ((url.includes('/src/core/history/row-integrity') || url.includes('/src/core/history/checkpoint-manager')) && (fn === 'stepDigest' || fn === 'framed')) return 'hash';
  if (url.includes('/src/core/state/state-frame')) return 'merge state';
  if (url.includes('/src/core/state/state-schema')) return 'validate';
  if (url.includes('/src/') || url.includes('/bench/')) return 'runtime (rest)';
  return null;
}

/** Self time per category and step: every sample goes to the nearest frame (itself, then its callers) that has a category. */
export function categorize(profile: CpuProfile, steps: number): { perStepUs: Record<Category, number>; busyUs: number } {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const cache = new Map<number, Category | 'idle' | 'profiler'>();
  const resolve = (id: number): Category | 'idle' | 'profiler' => {
    const hit = cache.get(id);
    if (hit) return hit;
    let found: Category | 'idle' | 'profiler' = 'runtime (rest)';
    for (let p: number | undefined = id; p !== undefined; p = parent.get(p)) {
      const frame = byId.get(p)!.callFrame;
      if (frame.functionName === '(idle)') {
        found = 'idle';
        break;
      }
      if (frame.url === 'node:inspector') {
        found = 'profiler';
        break;
      }
      const c = categoryOf(frame);
      if (c) {
        found = c;
        break;
      }
    }
    cache.set(id, found);
    return found;
  };
  const perStepUs = Object.fromEntries(CATEGORIES.map((c) => [c, 0])) as Record<Category, number>;
  let busy = 0;
  profile.samples.forEach((id, i) => {
    const c = resolve(id);
    if (c === 'idle' || c === 'profiler') return;
    const dt = profile.timeDeltas[i] ?? 0;
    perStepUs[c] += dt / steps;
    busy += dt / steps;
  });
  return { perStepUs, busyUs: busy };
}

interface CategoryChildResult {
  backend: Backend;
  steps: number;
  cpuUs: number;
  profileFile: string;
}

/**
 * The `realistic` group in a process of its own (`--child realistic-group [quick]`): its figures are the
 * runtime's per-step cost, and in the process that had run the earlier groups the same code measured
 * up to twice as slow (the step-work bound, pure functions with no runtime around them: 10.2-20.1 us
 * after the sequential group against 6.5-7.4 us alone, in four runs each way), so its figures would
 * depend on which groups ran before it. Progress lines go to this process's stderr.
 */
export function realisticFiguresIsolated(options: { quick: boolean }): Promise<Section[]> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      [path.join(__dirname, 'index.js'), '--child', 'realistic-group', ...(options.quick ? ['quick'] : [])],
      { maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`realistic group child failed: ${stderr.trim().split('\n').slice(-5).join(' / ') || error.message}`));
        resolve(JSON.parse(stdout.trim().split('\n').pop()!) as Section[]);
      },
    );
    child.stderr?.pipe(process.stderr);
  });
}

/** Child side of `realisticFiguresIsolated`: the group's sections, on a fresh environment it cleans up. */
export async function runRealisticGroupChild(args: string[], progress: (line: string) => void): Promise<Section[]> {
  const env = new BenchEnvironment();
  try {
    return await realisticFigures(env, { quick: args[0] === 'quick' }, progress);
  } finally {
    await env.cleanup();
  }
}

/** Child side: `--child realistic-profile <backend> <runs>`: runs of the realistic pipeline under the CPU profiler. */
export async function runRealisticProfileChild(args: string[]): Promise<CategoryChildResult> {
  const backend = args[0] as Backend;
  const runs = Number(args[1]);
  const steps = 200;
  const env = new BenchEnvironment();
  try {
    const bw = await env.waypoint(backend, { name: 'realprof' });
    const hooks: RealisticHooks = {};
    const pipeline = realisticPipeline(`realprof_${backend}`, steps, hooks);
    for (let i = 0; i < 3; i++) await measuredRun(bw, pipeline, hooks, steps, [[1, steps - 1]]); // warm-up
    const { result: cpu, profileFile } = await cpuProfiled(`realistic-${backend}`, async () => {
      let total = 0;
      for (let i = 0; i < runs; i++) total += (await measuredRun(bw, pipeline, hooks, steps, [[1, steps - 1]]))[0].cpuUs / runs;
      return total;
    });
    return { backend, steps: steps * runs, cpuUs: cpu, profileFile };
  } finally {
    await env.cleanup();
  }
}

function spawnChild(backend: Backend, runs: number): Promise<CategoryChildResult> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [path.join(__dirname, 'index.js'), '--child', 'realistic-profile', backend, String(runs)],
      { maxBuffer: 16 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) return reject(new Error(`realistic profile child (${backend}) failed: ${stderr.trim() || error.message}`));
        resolve(JSON.parse(stdout.trim().split('\n').pop()!) as CategoryChildResult);
      },
    );
  });
}

async function categoryProfile(options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const out = section(
    'realistic-profile',
    'Where the per-step CPU of the realistic pipeline goes',
    'V8 CPU profiler (100 µs sampling) over runs of the realistic pipeline after a warm-up, in a child process; each sample goes to the nearest frame with a category (itself or a caller); idle time left out; per step',
    ['backend', ...CATEGORIES, 'sampled busy', 'node CPU (cpuUsage, profiler on)'],
  );
  for (const [backend, runs] of [
    ['memory', options.quick ? 10 : 30],
    ['postgres', options.quick ? 3 : 8],
  ] as const) {
    progress(`realistic: profile on ${backend}`);
    const child = await spawnChild(backend, runs);
    const profile = JSON.parse(readFileSync(child.profileFile, 'utf8')) as CpuProfile;
    rmSync(child.profileFile, { force: true });
    const { perStepUs, busyUs } = categorize(profile, child.steps);
    out.rows.push([backend, ...CATEGORIES.map((c) => us(perStepUs[c])), us(busyUs), us(child.cpuUs)]);
    out.figures[backend] = { perStepUs, busyUs, cpuUs: child.cpuUs, steps: child.steps };
  }
  out.notes.push('The profiler roughly doubles the cost of a step: read the split between the columns, and the wall / CPU figures above for the cost.');
  out.notes.push(
    "validate = class-validator, class-transformer and the state schema's validation; merge state = StateFrame (state-frame.ts: merge and freeze); store call = the store, pg and the bench's counting proxy; hash = stepDigest; runtime (rest) = the executor, lease, logger, promises.",
  );
  return out;
}
