import type { Backend, BenchEnvironment, BenchWaypoint } from './environment';
import { pgAppendWal, pgWriteStats } from './pg-diagnostics';
import { type RedisServerTimes, redisServerTimes } from './redis-server-time';
import { PgStepRowFloor } from './step-row-floor';
import { SqliteSteadyFloor } from './sqlite-statement-floor';
import { StoreAppendFloor } from './store-floor';
import { type Floor, PgFloor, RedisFloor, SqliteFloor } from './floors';
import { totalOf, type PgStatementCounter } from './instruments';
import { benchPipeline, flatStepPayload, Notifier, type StepHooks } from './pipeline';
import { count, ratio, ratioSpread, section, us, usSpread, verdict, type Section } from './report';
import { pairedRatio, summarize, within } from './stats';
import { describeCalls, interleave, timedRun, type RunMeasurement } from './timed-run';

/**
 * Figures 1 and 2: the sequential per-step cost of a 1 KB step (default durability: every step
 * committed before the next; lease renewal, SHA-256 integrity, validation and metrics on) beside each
 * backend's raw floor, and the store calls / PostgreSQL statements each step costs on the hot path.
 * A second variant calls one guarded @SideEffect per step.
 */

export interface SequentialConfig {
  rounds: number;
  payloadBytes: number;
  steps: Record<Backend, number>;
}

// Tiered write-through commits every step in PostgreSQL first, so it is held to the PostgreSQL floor.
// Issue 22: SQLite (WAL, synchronous FULL) at most 1.5x its INSERT floor (issue 10 had 2x).
const TARGETS: Partial<Record<Backend, number>> = { postgres: 1.25, sqlite: 1.5, redis: 2, tiered: 1.3 };
/** Issue 40: `durability: 'async'` (the next step overlaps the last write), against the same floors. */
const ASYNC_TARGETS: Partial<Record<Backend, number>> = { postgres: 1.1, sqlite: 1.15, redis: 1.5 };

interface BackendResult {
  backend: Backend;
  bw: BenchWaypoint;
  floor: { what: string; samples: number[] } | null;
  appendOnly: number[];
  /** PostgreSQL: the step row's bare INSERT by the raw client (step-row-floor.ts); SQLite: the steady insert by a raw connection (sqlite-statement-floor.ts). */
  rowInsert: number[] | null;
  /** Redis: the server's own time per append script and per SET (redis-server-time.ts). */
  serverTimes: RedisServerTimes | null;
  /** The runtime on the memory store with one floor write awaited per step (redis, tiered): the least any store on this backend can cost. */
  lowerBound: number[] | null;
  plain: number[];
  /** The same steps with `durability: 'async'` (postgres, sqlite, redis). */
  async: number[] | null;
  effect: number[];
  plainRuns: RunMeasurement[];
  effectRuns: RunMeasurement[];
}

async function openFloor(env: BenchEnvironment, backend: Backend): Promise<Floor | null> {
  switch (backend) {
    case 'postgres':
    case 'tiered':
      return PgFloor.open(env);
    case 'sqlite':
      return SqliteFloor.open(env);
    case 'redis':
      return RedisFloor.open(env);
    case 'memory':
      return null;
  }
}

async function measureBackend(env: BenchEnvironment, backend: Backend, config: SequentialConfig, pg: PgStatementCounter): Promise<BackendResult> {
  const steps = config.steps[backend];
  const bw = await env.waypoint(backend, { name: 'seq' });
  const plainHooks: StepHooks = {};
  const effectHooks: StepHooks = {};
  const plain = benchPipeline({ name: `seq_${backend}`, steps, payloadBytes: config.payloadBytes, state: 'flat', hooks: plainHooks });
  const effect = benchPipeline({ name: `seqfx_${backend}`, steps, payloadBytes: config.payloadBytes, state: 'flat', hooks: effectHooks, notifier: new Notifier() });
  const floor = await openFloor(env, backend);
  const payload = flatStepPayload(config.payloadBytes, steps);
  const counter = backend === 'postgres' ? pg : undefined;
  const plainRuns: RunMeasurement[] = [];
  const effectRuns: RunMeasurement[] = [];
  let rowFloor: PgStepRowFloor | SqliteSteadyFloor | null = null;
  try {
    const measures: Record<string, () => Promise<number>> = {
      plain: async () => {
        const m = await timedRun(bw, plain, plainHooks, steps, counter);
        plainRuns.push(m);
        return m.perStepUs;
      },
      effect: async () => {
        const m = await timedRun(bw, effect, effectHooks, steps, counter);
        effectRuns.push(m);
        return m.perStepUs;
      },
    };
    if (floor) measures.floor = () => floor.batch(steps, payload);
    if (ASYNC_TARGETS[backend]) {
      const hooks: StepHooks = {};
      const overlapped = await env.waypoint(backend, { name: 'seqasync', options: { durability: 'async' } });
      const pipeline = benchPipeline({ name: `seqasync_${backend}`, steps, payloadBytes: config.payloadBytes, state: 'flat', hooks });
      measures.async = async () => (await timedRun(overlapped, pipeline, hooks, steps)).perStepUs;
    }
    const appendOnly = new StoreAppendFloor(bw.store, (runId) => bw.forget(runId));
    measures.appendOnly = () => appendOnly.batch(steps, payload);
    if (backend === 'postgres') {
      rowFloor = await PgStepRowFloor.open(env, `"${env.pgSchema('seq')}".waypoint_steps`);
      const row = rowFloor;
      measures.rowInsert = () => row.batch(steps, payload);
    }
    if (backend === 'sqlite') {
      const steady = await SqliteSteadyFloor.open(env.sqlitePath('seq'), bw.store);
      rowFloor = steady;
      measures.rowInsert = () => steady.batch(steps, payload);
    }
    if (floor?.write && (backend === 'redis' || backend === 'tiered' || backend === 'sqlite')) {
      const write = floor.write.bind(floor);
      const hooks: StepHooks = {};
      const lower = await env.waypoint('memory', { name: `lower_${backend}`, afterAppend: (a) => write(`lower-${a.step.runId}`, a.step.sequence, a.step.output) });
      const pipeline = benchPipeline({ name: `seqlb_${backend}`, steps, payloadBytes: config.payloadBytes, state: 'flat', hooks });
      measures.lowerBound = async () => (await timedRun(lower, pipeline, hooks, steps)).perStepUs;
    }
    const samples = await interleave(config.rounds, measures);
    const serverTimes = backend === 'redis' && floor ? await redisServerTimes(env.redisUrl, measures.appendOnly, () => floor.batch(steps, payload)) : null;
    // Warm-up runs were pushed too: keep the measured rounds only.
    plainRuns.splice(0, plainRuns.length - config.rounds);
    effectRuns.splice(0, effectRuns.length - config.rounds);
    return {
      backend,
      bw,
      floor: floor ? { what: floor.what, samples: samples.floor } : null,
      appendOnly: samples.appendOnly,
      rowInsert: samples.rowInsert ?? null,
      serverTimes,
      lowerBound: samples.lowerBound ?? null,
      plain: samples.plain,
      async: samples.async ?? null,
      effect: samples.effect,
      plainRuns,
      effectRuns,
    };
  } finally {
    await floor?.close();
    await rowFloor?.close();
  }
}

/** Mean per-step rate of each method over several measured runs. */
function meanCalls(runs: readonly RunMeasurement[], pick: (m: RunMeasurement) => Record<string, number>): Record<string, number> {
  const sum: Record<string, number> = {};
  for (const m of runs) for (const [k, v] of Object.entries(pick(m))) sum[k] = (sum[k] ?? 0) + v / runs.length;
  return sum;
}

/** Figures 1 and 2. @example const { cost, trips } = await sequentialFigures(env, ['postgres'], config, pg, log); */
export async function sequentialFigures(
  env: BenchEnvironment,
  backends: readonly Backend[],
  config: SequentialConfig,
  pg: PgStatementCounter,
  progress: (line: string) => void,
): Promise<{ cost: Section; trips: Section; perStepUs: Partial<Record<Backend, number>> }> {
  const cost = section(
    'sequential',
    `Sequential per-step cost, ${config.payloadBytes / 1000} KB step output, default durability`,
    `median of ${config.rounds} interleaved rounds (min–max); steady state of runs of N steps; ratio = median of per-round waypoint/floor; lease renewal every 250 ms, SHA-256, validation, prom-client metrics on`,
    ['backend', 'N', 'floor', 'floor / write', 'waypoint / step', 'ratio', 'target'],
  );
  const trips = section(
    'round-trips',
    'Round trips per step on the hot path',
    'store calls counted by a proxy around the bound CheckpointStore; PostgreSQL statements counted at pg Client#query; steady state, per step',
    ['backend', 'variant', 'store calls / step', 'PG statements / step', 'fixed calls per run (start + finish)'],
  );
  const perStepUs: Partial<Record<Backend, number>> = {};
  for (const backend of backends) {
    progress(`sequential: ${backend}`);
    let result: BackendResult;
    try {
      result = await measureBackend(env, backend, config, pg);
    } catch (error) {
      cost.rows.push([backend, '', 'unavailable', '', '', '', String((error as Error).message ?? error).slice(0, 80)]);
      cost.figures[backend] = { error: String(error) };
      continue;
    }
    const plain = summarize(result.plain);
    const effect = summarize(result.effect);
    const appendOnly = summarize(result.appendOnly);
    perStepUs[backend] = plain.median;
    const steps = String(config.steps[backend]);
    if (result.floor) {
      const floor = summarize(result.floor.samples);
      const r = pairedRatio(result.plain, result.floor.samples);
      const re = pairedRatio(result.effect, result.floor.samples);
      const target = TARGETS[backend]!;
      const v = within(r.median, target);
      cost.rows.push([backend, steps, result.floor.what, usSpread(floor), usSpread(plain), ratioSpread(r), verdict(v)]);
      cost.rows.push(['', '', 'store.appendStep alone', '', usSpread(appendOnly), ratioSpread(pairedRatio(result.appendOnly, result.floor.samples)), 'breakdown']);
      if (result.rowInsert && backend === 'sqlite') {
        const rowRatio = pairedRatio(result.rowInsert, result.floor.samples);
        cost.rows.push(['', '', 'the steady insert, raw better-sqlite3', '', usSpread(summarize(result.rowInsert)), ratioSpread(rowRatio), 'bound']);
        cost.notes.push(
          `${backend}: "the steady insert, raw better-sqlite3" = the store's own append statement (fence, sequence check, the whole row) run by a raw connection with prebuilt parameters: ${rowRatio.median.toFixed(2)}x the floor before any store or runtime code.`,
        );
      } else if (result.rowInsert) {
        const rowRatio = pairedRatio(result.rowInsert, result.floor.samples);
        cost.rows.push(['', '', 'the step row, bare INSERT (raw pg)', '', usSpread(summarize(result.rowInsert)), ratioSpread(rowRatio), 'bound']);
        cost.notes.push(
          `${backend}: "the step row, bare INSERT" = the store's own step row (every column, bound as the store binds them) inserted by the raw client with no fence, sequence check or run row: the row's width alone costs ${rowRatio.median.toFixed(2)}x the floor, which leaves ${Math.max(0, target - rowRatio.median).toFixed(2)}x of the ${target}x target for the fence, the check and the whole runtime.`,
        );
      }
      if (result.serverTimes) {
        const { appendUs, setUs } = result.serverTimes;
        cost.notes.push(
          `${backend}: Redis's own time per call (INFO commandstats, same prebuilt rows): the append script ${us(appendUs)}, the floor's SET ${us(setUs)}; the script's ${us(appendUs - setUs)} more is server time no client change can take back.`,
        );
        cost.figures[`${backend}:server-times`] = result.serverTimes;
      }
      if (result.lowerBound) {
        const lb = pairedRatio(result.lowerBound, result.floor.samples);
        cost.rows.push(['', '', 'runtime + 1 floor write / step', '', usSpread(summarize(result.lowerBound)), ratioSpread(lb), 'lower bound']);
        cost.notes.push(
          `${backend}: "runtime + 1 floor write / step" = the runtime on the memory store awaiting one ${result.floor.what} per step, no store logic at all: the cheapest a step on ${backend} can be; ` +
            `${lb.median > target ? `at ${lb.median.toFixed(2)}x it is already over the ${target}x target, which is out of reach for the store on this machine` : `${lb.median.toFixed(2)}x, under the ${target}x target`}.`,
        );
      }
      cost.rows.push(['', '', '+ 1 @SideEffect / step', '', usSpread(effect), ratioSpread(re), 'no target']);
      if (result.async) {
        const ra = pairedRatio(result.async, result.floor.samples);
        const va = within(ra.median, ASYNC_TARGETS[backend]!);
        cost.rows.push(['', '', "durability 'async'", '', usSpread(summarize(result.async)), ratioSpread(ra), verdict(va)]);
        cost.figures[`${backend}:async`] = { waypointUs: summarize(result.async), ratio: ra, target: ASYNC_TARGETS[backend], met: va.met, missedBy: va.missedBy };
      }
      if (!v.met) {
        const over = plain.median - target * floor.median;
        cost.notes.push(`${backend}: ${us(over)} per step over the ${target}x target (${(v.missedBy * 100).toFixed(1)}% too slow).`);
      }
      cost.figures[backend] = {
        floorWhat: result.floor.what,
        floorUs: floor,
        waypointUs: plain,
        ratio: r,
        target,
        met: v.met,
        missedBy: v.missedBy,
        appendOnlyUs: appendOnly,
        lowerBoundUs: result.lowerBound ? summarize(result.lowerBound) : null,
        lowerBoundRatio: result.lowerBound ? pairedRatio(result.lowerBound, result.floor.samples) : null,
        sideEffectUs: effect,
        sideEffectRatio: re,
      };
    } else {
      cost.rows.push([backend, steps, 'none (pure runtime)', '—', usSpread(plain), '—', 'no target']);
      cost.rows.push(['', '', 'store.appendStep alone', '', usSpread(appendOnly), '—', 'breakdown']);
      cost.rows.push(['', '', '+ 1 @SideEffect / step', '', usSpread(effect), '—', '']);
      cost.figures[backend] = { waypointUs: plain, appendOnlyUs: appendOnly, sideEffectUs: effect };
    }
    if (backend === 'postgres') await addPgWriteStats(env, result.bw, trips);
    for (const [variant, runs] of [
      ['plain', result.plainRuns],
      ['+ 1 @SideEffect', result.effectRuns],
    ] as const) {
      const calls = meanCalls(runs, (m) => m.callsPerStep);
      const fixed = meanCalls(runs, (m) => m.fixedCalls);
      const statements = runs.reduce((a, m) => a + m.statementsPerStep, 0) / runs.length;
      trips.rows.push([
        variant === 'plain' ? backend : '',
        variant,
        `${count(totalOf(calls))} (${describeCalls(calls)})`,
        backend === 'postgres' ? count(statements) : '—',
        `${count(totalOf(fixed), 1)} (${describeCalls(fixed)})`,
      ]);
      trips.figures[`${backend}:${variant}`] = { callsPerStep: calls, statementsPerStep: backend === 'postgres' ? statements : null, fixedCallsPerRun: fixed };
    }
  }
  trips.notes.push('Target: one round trip per step (issue 10). renewLease is the 250 ms lease heartbeat, not per step.');
  cost.notes.push(
    "\"store.appendStep alone\" = the store's append called in a loop with prebuilt rows (no runtime): floor → append-alone is the cost of the append's SQL/script, append-alone → waypoint is the runtime's.",
  );
  return { cost, trips, perStepUs };
}

/** PostgreSQL's own count of the run-row updates that were HOT, read after closing the pool (stats flush at session end). */
async function addPgWriteStats(env: BenchEnvironment, bw: BenchWaypoint, trips: Section): Promise<void> {
  const appends = bw.calls.snapshot().appendStep ?? 0;
  await bw.waypoint.close();
  try {
    const stats = await pgWriteStats(env.pgUrl, env.pgSchema('seq'), appends);
    const hot = stats.runUpdates > 0 ? stats.runHotUpdates / stats.runUpdates : 0;
    trips.figures['postgres:table-stats'] = { ...stats, appendsCounted: appends };
    // Run-row updates now come from leases and status changes, not from every step: count them per step.
    const perStep = stats.stepInserts > 0 ? stats.runUpdates / stats.stepInserts : 0;
    const indexEntries = stats.stepIndexes + (stats.stepInserts > 0 ? (stats.runUpdates - stats.runHotUpdates) / stats.stepInserts : 0) * stats.runIndexes;
    trips.notes.push(
      `PostgreSQL (pg_stat_user_tables): ${stats.runUpdates} run-row updates for ${stats.stepInserts} step rows (${perStep.toFixed(2)} per step: leases, status changes), ${(hot * 100).toFixed(0)}% HOT; ` +
        `a step writes ~${(1 + perStep).toFixed(2)} heap tuples and ~${indexEntries.toFixed(2)} index entries (a non-HOT run-row update writes one in each of the ${stats.runIndexes} indexes of waypoint_runs).`,
    );
    const wal = await pgAppendWal(env.pgUrl, env.pgSchema('wal'));
    trips.figures['postgres:append-wal'] = wal;
    trips.notes.push(
      `PostgreSQL WAL per step (EXPLAIN (ANALYZE, WAL), 200 appends of a 1 KB step): the append statement ${wal.appendBytes.toFixed(0)} B in ${wal.appendRecords.toFixed(2)} records, ` +
        `the floor's INSERT ${wal.floorBytes.toFixed(0)} B in ${wal.floorRecords.toFixed(2)} records (${ratio(wal.appendBytes / wal.floorBytes)}); a count of work, which the machine's load does not move. ` +
        `The server's execution time per statement (EXPLAIN's Execution Time with TIMING OFF: the executor alone, no network, plan or commit, no per-node clock reads), same appends: ${us(wal.appendExecUs)} against ${us(wal.floorExecUs)} for the floor's INSERT: ` +
        `the fence (the run row locked FOR SHARE), the sequence check and the wider row cost the server ${us(wal.appendExecUs - wal.floorExecUs)} per step more than the floor's INSERT (the steady append, the statement a step that leaves its run running sends).`,
    );
  } catch (error) {
    trips.notes.push(`PostgreSQL table stats unavailable: ${String(error)}`);
  }
}
