import 'reflect-metadata';
import { cpus } from 'node:os';
import { IsInt, IsOptional, IsString, Min } from 'class-validator';
import { Agent, Pipeline, Step, forEach, type StepContext } from '../src/index';
import { enqueue } from '../src/entry/queue';
import { FLEET_WORKER_FLAG, completedRuns, runFleetWorker, sleep, spawnFleetWorkers, spread, withBenchFleet } from './fleet-workers';
import { renderText, section, type Section } from './report';

/**
 * Fan-out across the fleet (issue 21): one parent whose `forEach` over a `@Pipeline` class queues N child
 * runs (1 step, 1 KB output each) for 3 worker processes (PostgreSQL store, pg-boss queue), against N
 * independent runs of the same child pipeline on the same fleet, in the same bench run. Both clocks start
 * at "go" with the workers up: the independent runs are queued by the bench process from then on (20 at
 * a time), the fan-out's children by the parent itself; each clock stops when the last run (the parent)
 * is completed. Also: how long after its last child the parent completed (its wake-up, the read of every
 * child's state in item order, its last step), on the database clock. Then the same N items as an agent
 * body with `{ distribute: true }` (hidden child runs), clocked the same way.
 *
 * From `bench/index.ts`: group `fanout` (opt-in: `--only fanout` or `--fanout`).
 * Standalone: `node dist/bench/fanout.js [--quick]`.
 */

const WORKERS = 3;
const CONCURRENCY = 4;
const KB = 'x'.repeat(1024);

export interface FanOutBenchOptions {
  /** 200 children and one round (a smoke run, not for quoting). */
  quick?: boolean;
  children?: number;
  rounds?: number;
  pgUrl?: string;
  progress?: (line: string) => void;
}

class ChildState {
  @IsInt()
  @Min(0)
  n!: number;

  @IsOptional()
  @IsString()
  out?: string;
}

class Produce extends Agent {
  @Step() produce(ctx: StepContext<ChildState>) {
    return { out: `${ctx.state.n}:${KB}` };
  }
}

@Pipeline({ name: 'fanout-bench-child', version: '1.0.0', state: ChildState, agents: [Produce] })
class FanOutBenchChild {}

class ParentState {
  @IsInt()
  @Min(0)
  count!: number;

  @IsOptional()
  results?: unknown[];

  @IsOptional()
  @IsInt()
  bytes?: number;

  /** An item's output in the distributed agent body (`state.results[i].out`). */
  @IsOptional()
  @IsString()
  out?: string;
}

class Tally extends Agent {
  @Step() tally(ctx: StepContext<ParentState>) {
    const results = (ctx.state.results ?? []) as ChildState[];
    return { bytes: results.reduce((sum, r) => sum + (r.out?.length ?? 0), 0) };
  }
}

@Pipeline({
  name: 'fanout-bench-parent',
  version: '1.0.0',
  state: ParentState,
  agents: [forEach((s: ParentState) => Array.from({ length: s.count }, (_, n) => ({ n })), FanOutBenchChild, { into: 'results', concurrency: 100_000 }), Tally],
})
class FanOutBenchParent {}

/** The same item as an agent body: `{ distribute: true }` makes each item a hidden child run. */
class ProduceItem extends Agent {
  @Step() produce(ctx: StepContext<ParentState>) {
    return { out: `${(ctx.item as { n: number }).n}:${KB}` };
  }
}

@Pipeline({
  name: 'fanout-bench-distributed',
  version: '1.0.0',
  state: ParentState,
  agents: [forEach((s: ParentState) => Array.from({ length: s.count }, (_, n) => ({ n })), ProduceItem, { into: 'results', concurrency: 100_000, distribute: true }), Tally],
})
class FanOutBenchDistributed {}

interface Round {
  independentSeconds: number;
  fanOutSeconds: number;
  /** Parent completed this long after its last child completed (database clock). */
  parentAfterLastChildMs: number;
  /** The same N items as a distributed agent body (`{ distribute: true }`): clock and the parent's wake-up. */
  distributedSeconds: number;
  distributedAfterLastItemMs: number;
}

/**
 * Measures fan-out against independent runs over 3 worker processes; returns the bench section.
 *
 * @example
 * const s = await runFanOutBench({ quick: true, progress: (l) => process.stderr.write(l + '\n') });
 */
export async function runFanOutBench(options: FanOutBenchOptions = {}): Promise<Section> {
  const quick = options.quick ?? false;
  const children = options.children ?? (quick ? 200 : 1000);
  const rounds = options.rounds ?? (quick ? 1 : 3);
  const pgUrl = options.pgUrl ?? process.env.WAYPOINT_BENCH_PG_URL ?? process.env.WAYPOINT_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const progress = options.progress ?? (() => undefined);
  const result = section(
    'fanout',
    `Fan-out across the fleet (PostgreSQL store + pg-boss, ${WORKERS} worker processes, ${CONCURRENCY} runs at once each)`,
    `${children} child runs of one parent (1 step, 1 KB output each) vs ${children} independent runs of the same pipeline on the same fleet; clock from "go" to the last run completed; median of ${rounds} round(s) with (min–max). ${cpus().length} CPU(s).`,
    ['figure', 'value', 'target'],
  );
  const all: Round[] = [];
  for (let round = 0; round < rounds; round++) {
    progress(`fanout: round ${round + 1}/${rounds} (${children} children)`);
    all.push(await measure(pgUrl, children));
  }
  const ratio = all.map((r) => r.independentSeconds / r.fanOutSeconds);
  result.rows.push(['independent runs/s', spread(all.map((r) => children / r.independentSeconds)), '']);
  result.rows.push(['fan-out children/s', spread(all.map((r) => children / r.fanOutSeconds)), '']);
  result.rows.push(['fan-out vs independent (throughput)', `${spread(ratio, 2)}x`, '>= 0.8x']);
  result.rows.push(['parent completed after its last child (ms)', spread(all.map((r) => r.parentAfterLastChildMs)), '< 60000']);
  result.rows.push(['distributed agent body items/s', spread(all.map((r) => children / r.distributedSeconds)), '']);
  result.rows.push([
    'distributed agent body vs independent (throughput)',
    `${spread(
      all.map((r) => r.independentSeconds / r.distributedSeconds),
      2,
    )}x`,
    '',
  ]);
  result.rows.push(['parent completed after its last item, distributed body (ms)', spread(all.map((r) => r.distributedAfterLastItemMs)), '< 60000']);
  result.notes.push(
    "The parent's time after its last child includes its wake-up (a queue job sent by the worker that ended the last child), the read of every child's state in item order, and its last step.",
  );
  result.figures = { children, workers: WORKERS, concurrencyPerWorker: CONCURRENCY, rounds, samples: all };
  return result;
}

async function measure(pgUrl: string, count: number): Promise<Round> {
  return withBenchFleet(pgUrl, 'fanout', [FanOutBenchParent, FanOutBenchChild, FanOutBenchDistributed], async (fleet) => {
    const { waypoint, queue, db, storeSchema } = fleet;
    const go = await spawnFleetWorkers(fleet, __filename, WORKERS);
    go();

    // Independent runs: queued from "go", 20 at a time, drained by the same 3 workers.
    let started = performance.now();
    const sending = (async () => {
      for (let i = 0; i < count; i += 20) {
        await Promise.all(Array.from({ length: Math.min(20, count - i) }, (_, j) => enqueue(waypoint, FanOutBenchChild, { runId: `solo-${i + j}`, input: { n: i + j }, queue })));
      }
    })();
    while ((await completedRuns(fleet, `run_id LIKE 'solo-%'`)) < count) await sleep(25);
    await sending;
    const independentSeconds = (performance.now() - started) / 1000;

    started = performance.now();
    await enqueue(waypoint, FanOutBenchParent, { runId: 'parent', input: { count }, queue });
    while ((await completedRuns(fleet, `run_id = 'parent'`)) < 1) await sleep(25);
    const fanOutSeconds = (performance.now() - started) / 1000;
    const { rows } = await db.query<{ last: Date; parent: Date }>(
      `SELECT (SELECT max(updated_at) FROM "${storeSchema}".waypoint_runs WHERE parent_run_id = 'parent') AS last, (SELECT updated_at FROM "${storeSchema}".waypoint_runs WHERE run_id = 'parent') AS parent`,
    );
    const children = await completedRuns(fleet, `parent_run_id = 'parent'`);
    if (children !== count) throw new Error(`fan-out bench: ${children} of ${count} children completed`);

    // The same items as a distributed agent body: hidden child runs of a pipeline made from the body.
    started = performance.now();
    await enqueue(waypoint, FanOutBenchDistributed, { runId: 'dparent', input: { count }, queue });
    while ((await completedRuns(fleet, `run_id = 'dparent'`)) < 1) await sleep(25);
    const distributedSeconds = (performance.now() - started) / 1000;
    const items = await db.query<{ last: Date; parent: Date }>(
      `SELECT (SELECT max(updated_at) FROM "${storeSchema}".waypoint_runs WHERE parent_run_id = 'dparent') AS last, (SELECT updated_at FROM "${storeSchema}".waypoint_runs WHERE run_id = 'dparent') AS parent`,
    );
    const done = await completedRuns(fleet, `parent_run_id = 'dparent'`);
    if (done !== count) throw new Error(`fan-out bench: ${done} of ${count} distributed items completed`);
    return {
      independentSeconds,
      fanOutSeconds,
      parentAfterLastChildMs: rows[0].parent.getTime() - rows[0].last.getTime(),
      distributedSeconds,
      distributedAfterLastItemMs: items.rows[0].parent.getTime() - items.rows[0].last.getTime(),
    };
  });
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  const task =
    argv[0] === FLEET_WORKER_FLAG
      ? runFleetWorker({ pipelines: [FanOutBenchParent, FanOutBenchChild, FanOutBenchDistributed], concurrency: CONCURRENCY })
      : runFanOutBench({ quick: argv.includes('--quick'), progress: (l) => process.stderr.write(`bench: ${l}\n`) }).then((s) =>
          process.stdout.write(renderText([s], [`Waypoint fan-out bench — ${new Date().toISOString()}`]) + '\n'),
        );
  task.then(
    () => process.exit(process.exitCode ?? 0),
    (error: unknown) => {
      process.stderr.write(`fan-out bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}
