import type { BenchEnvironment, BenchWaypoint } from './environment';
import { PgPoolFloor } from './floors';
import { BENCH_INPUT, benchPipeline, flatStepPayload, type Class, type StepHooks } from './pipeline';
import { count, ratioSpread, section, verdict, type Section } from './report';
import { atLeast, pairedRatio, summarize } from './stats';
import { interleave, nextRunId } from './timed-run';
import { TypeOrmCheckpointStore, type CheckpointStore } from '../src/index';

/**
 * Figure 5: many concurrent runs on one PostgreSQL through one pool of 20: steps/s at 1, 2, 4, 8 and 20
 * concurrent runs of 100 steps, beside as many clients doing raw INSERT commits through a pool of the
 * same size. Throughput is taken in the steady state, while every run is stepping (from the last run's
 * first step to the first run's last step), so run start and finish are not in it; the end-to-end
 * figure (whole wall time) is in --json.
 */

const POOL_SIZE = 20;

interface Throughput {
  steady: number;
  endToEnd: number;
  /** Step appends per PostgreSQL statement (and commit): the group-commit batching factor. */
  perCommit: number;
  /** CPU time of this Node process over the wall time (1 = one core busy): is the runtime the bottleneck? */
  cpu: number;
}

async function concurrentRuns(bw: BenchWaypoint, pipeline: Class, hooks: StepHooks, runs: number, steps: number): Promise<Throughput> {
  const times: number[] = [];
  let lastFirst = 0;
  let firstLast = Infinity;
  hooks.onStep = (index) => {
    const now = performance.now();
    times.push(now);
    if (index === 0) lastFirst = now;
    else if (index === steps - 1 && now < firstLast) firstLast = now;
  };
  const batching = groupCommitOf(bw.store);
  const before = batching?.groupCommitStats ?? null;
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  let results;
  try {
    results = await Promise.all(Array.from({ length: runs }, () => bw.waypoint.run(pipeline, { runId: nextRunId('conc'), input: BENCH_INPUT })));
  } finally {
    hooks.onStep = undefined;
  }
  const wall = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpuStart);
  const cpu = (used.user + used.system) / 1e6 / wall;
  for (const r of results) if (r.status !== 'completed' || r.stepsExecuted !== steps) throw new Error(`concurrent run ended ${r.status} after ${r.stepsExecuted} steps`);
  const inWindow = times.filter((t) => t > lastFirst && t <= firstLast).length;
  const windowSeconds = (firstLast - lastFirst) / 1000;
  // With overlapping runs the window is wide; should a run finish before the last one starts, there is none.
  const steady = windowSeconds > 0 && inWindow > 0 ? inWindow / windowSeconds : (runs * steps) / wall;
  const afterStats = batching?.groupCommitStats ?? null;
  const perCommit = before && afterStats ? (afterStats.appends - before.appends) / Math.max(1, afterStats.statements - before.statements) : 1;
  return { steady, endToEnd: (runs * steps) / wall, cpu, perCommit };
}

/** The SQL store under the counting proxy, when it batches appends. */
function groupCommitOf(store: CheckpointStore): TypeOrmCheckpointStore | null {
  return store instanceof TypeOrmCheckpointStore ? store : null;
}

/** Figure 5. @example sections.push(await concurrencyFigure(env, { quick: false }, log)); */
export async function concurrencyFigure(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const levels = options.quick ? [1, 4, 20] : [1, 2, 4, 8, 20];
  const steps = options.quick ? 40 : 100;
  const rounds = options.quick ? 2 : 3;
  const out = section(
    'concurrency',
    `Concurrent runs on one PostgreSQL (pool of ${POOL_SIZE}), ${steps} steps each`,
    `steps/s, median of ${rounds} interleaved rounds (min–max); floor = as many clients doing INSERT commits of the same payload through a pg pool of ${POOL_SIZE}`,
    ['runs', 'floor inserts/s', 'waypoint steps/s', 'ratio', 'scaling vs 1 run', 'appends / commit', 'node CPU', 'target'],
  );
  const bw = await env.waypoint('postgres', { name: 'conc', poolSize: POOL_SIZE });
  // The same runs with every append committed alone: what group commit is worth, in this run.
  const alone = await env.waypoint('postgres', { name: 'conc_alone', poolSize: POOL_SIZE, groupCommit: false });
  const hooks: StepHooks = {};
  const pipeline = benchPipeline({ name: 'concurrent', steps, payloadBytes: 1000, state: 'flat', hooks });
  const floor = await PgPoolFloor.open(env, POOL_SIZE);
  const payload = flatStepPayload(1000, steps);
  let single = 0;
  try {
    const cases = [...levels.map((runs) => ({ runs, grouped: true })), { runs: levels.at(-1)!, grouped: false }];
    for (const { runs, grouped } of cases) {
      progress(`concurrency: ${runs} runs${grouped ? '' : ', group commit off'}`);
      const ends: number[] = [];
      const cpus: number[] = [];
      const perCommit: number[] = [];
      const samples = await interleave(rounds, {
        floor: () => floor.throughput(runs, steps, payload),
        waypoint: async () => {
          const t = await concurrentRuns(grouped ? bw : alone, pipeline, hooks, runs, steps);
          ends.push(t.endToEnd);
          cpus.push(t.cpu);
          perCommit.push(t.perCommit);
          return t.steady;
        },
      });
      const floorS = summarize(samples.floor);
      const wp = summarize(samples.waypoint);
      const r = pairedRatio(samples.waypoint, samples.floor);
      if (runs === 1 && grouped) single = wp.median;
      const target = runs === 20 && grouped ? verdict(atLeast(r.median, 1), '≥') : grouped ? '' : 'comparison';
      const batching = summarize(perCommit.slice(-rounds)).median;
      out.rows.push([
        grouped ? String(runs) : `${runs}, group commit off`,
        `${count(floorS.median, 0)} (${count(floorS.min, 0)}–${count(floorS.max, 0)})`,
        `${count(wp.median, 0)} (${count(wp.min, 0)}–${count(wp.max, 0)})`,
        ratioSpread(r),
        single ? `${(wp.median / single).toFixed(2)}x` : '—',
        batching.toFixed(1),
        `${(summarize(cpus.slice(-rounds)).median * 100).toFixed(0)}%`,
        target,
      ]);
      out.figures[grouped ? String(runs) : `${runs}-alone`] = {
        floorPerSecond: floorS,
        waypointStepsPerSecond: wp,
        endToEndStepsPerSecond: summarize(ends.slice(-rounds)),
        nodeCpu: summarize(cpus.slice(-rounds)),
        appendsPerCommit: batching,
        ratio: r,
      };
    }
  } finally {
    await floor.close();
  }
  out.notes.push(
    'Target (issue 10): at 20 runs, at least the floor\'s throughput. Group commit (on by default) sends the appends of runs that are ready together as one statement and one commit; "appends / commit" is its batching factor (1.0 = every append alone), and the "group commit off" row is the same runs with `groupCommit: false`.',
  );
  out.notes.push(
    '"node CPU" = this process\'s CPU time / wall time during the waypoint-durable runs (100% = one core): near 100% means the runtime, not PostgreSQL, limits throughput.',
  );
  return out;
}
