import 'reflect-metadata';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { createInterface } from 'node:readline';
import { IsInt, IsOptional, IsString, Min } from 'class-validator';
import { Client } from 'pg';
import { Agent, Pipeline, Step, Waypoint, forEach, postgresStorage, type StepContext } from '../src/index';
import { PgBossRunQueue, enqueue, startWorker } from '../src/queue/index';
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
const WORKER_FLAG = '--fanout-worker';
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
  @Step() async produce(ctx: StepContext<ChildState>) {
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
  @Step() async tally(ctx: StepContext<ParentState>) {
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
  @Step() async produce(ctx: StepContext<ParentState>) {
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
  const tag = `${process.pid}_${randomBytes(3).toString('hex')}`;
  const storeSchema = `wpb_${tag}_fanout_store`;
  const queueSchema = `wpb_${tag}_fanout_queue`;
  const queue = new PgBossRunQueue({ url: pgUrl, schema: queueSchema });
  const waypoint = await Waypoint.create({
    modules: [postgresStorage({ url: pgUrl, schema: storeSchema })],
    pipelines: [FanOutBenchParent, FanOutBenchChild, FanOutBenchDistributed],
  });
  const db = new Client({ connectionString: pgUrl });
  await db.connect();
  const workers: ChildProcess[] = [];
  const completed = async (where: string) =>
    Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM "${storeSchema}".waypoint_runs WHERE status = 'completed' AND ${where}`)).rows[0].n);
  try {
    await queue.start();
    const env = { ...process.env, FANOUT_BENCH_PG_URL: pgUrl, FANOUT_BENCH_STORE_SCHEMA: storeSchema, FANOUT_BENCH_QUEUE_SCHEMA: queueSchema, WAYPOINT_LOG_LEVEL: 'error' };
    for (let i = 0; i < WORKERS; i++) workers.push(spawn(process.execPath, [__filename, WORKER_FLAG], { env, stdio: ['pipe', 'pipe', 'inherit'] }));
    await Promise.all(workers.map((child) => lineFrom(child, 'ready')));
    for (const child of workers) child.stdin!.write('go\n');

    // Independent runs: queued from "go", 20 at a time, drained by the same 3 workers.
    let started = performance.now();
    const sending = (async () => {
      for (let i = 0; i < count; i += 20) {
        await Promise.all(Array.from({ length: Math.min(20, count - i) }, (_, j) => enqueue(waypoint, FanOutBenchChild, { runId: `solo-${i + j}`, input: { n: i + j }, queue })));
      }
    })();
    while ((await completed(`run_id LIKE 'solo-%'`)) < count) await sleep(25);
    await sending;
    const independentSeconds = (performance.now() - started) / 1000;

    started = performance.now();
    await enqueue(waypoint, FanOutBenchParent, { runId: 'parent', input: { count }, queue });
    while ((await completed(`run_id = 'parent'`)) < 1) await sleep(25);
    const fanOutSeconds = (performance.now() - started) / 1000;
    const { rows } = await db.query<{ last: Date; parent: Date }>(
      `SELECT (SELECT max(updated_at) FROM "${storeSchema}".waypoint_runs WHERE parent_run_id = 'parent') AS last, (SELECT updated_at FROM "${storeSchema}".waypoint_runs WHERE run_id = 'parent') AS parent`,
    );
    const children = await completed(`parent_run_id = 'parent'`);
    if (children !== count) throw new Error(`fan-out bench: ${children} of ${count} children completed`);

    // The same items as a distributed agent body: hidden child runs of a pipeline made from the body.
    started = performance.now();
    await enqueue(waypoint, FanOutBenchDistributed, { runId: 'dparent', input: { count }, queue });
    while ((await completed(`run_id = 'dparent'`)) < 1) await sleep(25);
    const distributedSeconds = (performance.now() - started) / 1000;
    const items = await db.query<{ last: Date; parent: Date }>(
      `SELECT (SELECT max(updated_at) FROM "${storeSchema}".waypoint_runs WHERE parent_run_id = 'dparent') AS last, (SELECT updated_at FROM "${storeSchema}".waypoint_runs WHERE run_id = 'dparent') AS parent`,
    );
    const done = await completed(`parent_run_id = 'dparent'`);
    if (done !== count) throw new Error(`fan-out bench: ${done} of ${count} distributed items completed`);
    return {
      independentSeconds,
      fanOutSeconds,
      parentAfterLastChildMs: rows[0].parent.getTime() - rows[0].last.getTime(),
      distributedSeconds,
      distributedAfterLastItemMs: items.rows[0].parent.getTime() - items.rows[0].last.getTime(),
    };
  } finally {
    await Promise.all(workers.map((child) => stopChild(child)));
    await waypoint.close();
    await queue.close();
    await db.query(`DROP SCHEMA IF EXISTS "${storeSchema}" CASCADE; DROP SCHEMA IF EXISTS "${queueSchema}" CASCADE`);
    await db.end();
  }
}

/** Worker side: a Waypoint and a fleet worker on both pipelines that starts fetching on "go"; SIGTERM stops it. */
async function workerMain(): Promise<void> {
  const env = process.env;
  const pgUrl = env.FANOUT_BENCH_PG_URL!;
  const queue = new PgBossRunQueue({ url: pgUrl, schema: env.FANOUT_BENCH_QUEUE_SCHEMA });
  const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: pgUrl, schema: env.FANOUT_BENCH_STORE_SCHEMA, poolSize: CONCURRENCY + 2 })] });
  await queue.start();
  process.stdout.write('ready\n');
  await lineFrom(process.stdin, 'go');
  const worker = await startWorker(waypoint, { pipelines: [FanOutBenchParent, FanOutBenchChild, FanOutBenchDistributed], queue, concurrency: CONCURRENCY, pollIntervalMs: 100 });
  await worker.stopped;
  await queue.close();
  await waypoint.close();
}

function lineFrom(source: ChildProcess | NodeJS.ReadableStream, expected: string): Promise<void> {
  const stream = 'stdout' in source && source.stdout ? source.stdout : (source as NodeJS.ReadableStream);
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: stream });
    lines.on('line', (line) => {
      if (line.trim() !== expected) return;
      lines.close();
      resolve();
    });
    if ('once' in source && 'pid' in source) source.once('exit', (code) => reject(new Error(`fan-out bench worker exited (code ${code}) before '${expected}'`)));
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

function spread(values: number[], digits?: number): string {
  const fmt = (v: number) => (digits !== undefined ? v.toFixed(digits) : v >= 100 ? v.toFixed(0) : v.toFixed(1));
  return values.length === 1 ? fmt(values[0]) : `${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  const task =
    argv[0] === WORKER_FLAG
      ? workerMain()
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
