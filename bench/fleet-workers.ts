import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Client } from 'pg';
import { Waypoint, postgresStorage, type CreateOptions } from '../src/index';
import { PgBossRunQueue, startWorker, type WorkerOptions } from '../src/entry/queue';

/**
 * What the fleet benches (bench/fleet.ts, bench/fanout.ts) share: a PostgreSQL store and a pg-boss queue
 * in schemas of their own, worker processes spawned from the bench's own file that report `ready` and
 * start fetching on `go`, and the teardown (workers stopped, schemas dropped).
 */

/** The argument that makes a bench file run as a fleet worker (see {@link runFleetWorker}). */
export const FLEET_WORKER_FLAG = '--bench-fleet-worker';

const ENV_PG_URL = 'WAYPOINT_BENCH_FLEET_PG_URL';
const ENV_STORE_SCHEMA = 'WAYPOINT_BENCH_FLEET_STORE_SCHEMA';
const ENV_QUEUE_SCHEMA = 'WAYPOINT_BENCH_FLEET_QUEUE_SCHEMA';

/** One measurement's store, queue and worker processes. */
export interface BenchFleet {
  pgUrl: string;
  storeSchema: string;
  queueSchema: string;
  queue: PgBossRunQueue;
  waypoint: Waypoint;
  /** A plain client on the bench database, for counting completed runs. */
  db: Client;
  /** Spawned by {@link spawnFleetWorkers}; stopped by {@link withBenchFleet}. */
  workers: ChildProcess[];
}

/**
 * Creates the store and queue schemas for one measurement (`wpb_<pid>_<random>_<name>_store|queue`), runs
 * `body`, then stops the workers and drops both schemas, whether `body` succeeded or not.
 *
 * @example
 * await withBenchFleet(pgUrl, 'fleet', [MyPipeline], async (fleet) => { ... });
 */
export async function withBenchFleet<T>(pgUrl: string, name: string, pipelines: NonNullable<CreateOptions['pipelines']>, body: (fleet: BenchFleet) => Promise<T>): Promise<T> {
  const tag = `${process.pid}_${randomBytes(3).toString('hex')}`;
  const storeSchema = `wpb_${tag}_${name}_store`;
  const queueSchema = `wpb_${tag}_${name}_queue`;
  const queue = new PgBossRunQueue({ url: pgUrl, schema: queueSchema });
  const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: pgUrl, schema: storeSchema })], pipelines });
  const db = new Client({ connectionString: pgUrl });
  await db.connect();
  const fleet: BenchFleet = { pgUrl, storeSchema, queueSchema, queue, waypoint, db, workers: [] };
  try {
    await queue.start();
    return await body(fleet);
  } finally {
    await Promise.all(fleet.workers.map((child) => stopChild(child)));
    await waypoint.close();
    await queue.close();
    await db.query(`DROP SCHEMA IF EXISTS "${storeSchema}" CASCADE; DROP SCHEMA IF EXISTS "${queueSchema}" CASCADE`);
    await db.end();
  }
}

/**
 * Spawns `count` worker processes running `script` with {@link FLEET_WORKER_FLAG} on the fleet's schemas
 * and resolves once every one has reported `ready`. Call the returned `go` to start them all fetching.
 *
 * @example
 * const go = await spawnFleetWorkers(fleet, __filename, 3);
 * go();
 */
export async function spawnFleetWorkers(fleet: BenchFleet, script: string, count: number): Promise<() => void> {
  const env = { ...process.env, [ENV_PG_URL]: fleet.pgUrl, [ENV_STORE_SCHEMA]: fleet.storeSchema, [ENV_QUEUE_SCHEMA]: fleet.queueSchema, WAYPOINT_LOG_LEVEL: 'error' };
  const spawned: ChildProcess[] = [];
  for (let i = 0; i < count; i++) spawned.push(spawn(process.execPath, [script, FLEET_WORKER_FLAG], { env, stdio: ['pipe', 'pipe', 'inherit'] }));
  fleet.workers.push(...spawned);
  await Promise.all(spawned.map((child) => lineFrom(child, 'ready')));
  return () => {
    for (const child of spawned) child.stdin!.write('go\n');
  };
}

/**
 * Worker side (the bench file run with {@link FLEET_WORKER_FLAG}): a Waypoint and a fleet worker on the
 * schemas its parent named, fetching from "go" on stdin until SIGTERM stops it.
 */
export async function runFleetWorker(options: Pick<WorkerOptions, 'pipelines' | 'recoverOrphans'> & { concurrency: number }): Promise<void> {
  const pgUrl = process.env[ENV_PG_URL];
  if (!pgUrl) throw new Error(`bench fleet worker: ${ENV_PG_URL} is not set (run by spawnFleetWorkers, not by hand)`);
  const queue = new PgBossRunQueue({ url: pgUrl, schema: process.env[ENV_QUEUE_SCHEMA] });
  const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: pgUrl, schema: process.env[ENV_STORE_SCHEMA], poolSize: options.concurrency + 2 })] });
  await queue.start();
  process.stdout.write('ready\n');
  await lineFrom(process.stdin, 'go');
  const worker = await startWorker(waypoint, { ...options, queue, pollIntervalMs: 100 });
  await worker.stopped;
  await queue.close();
  await waypoint.close();
}

/** Runs of `fleet`'s store with status completed that match the SQL condition `where`. */
export async function completedRuns(fleet: BenchFleet, where = 'true'): Promise<number> {
  const { rows } = await fleet.db.query<{ n: string }>(`SELECT count(*) AS n FROM "${fleet.storeSchema}".waypoint_runs WHERE status = 'completed' AND ${where}`);
  return Number(rows[0].n);
}

/** `median (min–max)` of repeated figures; one decimal below 100, none above, or `digits` decimals. */
export function spread(values: number[], digits?: number): string {
  const fmt = (v: number) => (digits !== undefined ? v.toFixed(digits) : v >= 100 ? v.toFixed(0) : v.toFixed(1));
  return values.length === 1 ? fmt(values[0]) : `${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
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
    if ('once' in source && 'pid' in source) source.once('exit', (code) => reject(new Error(`bench fleet worker exited (code ${code}) before '${expected}'`)));
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
