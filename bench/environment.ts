import { Container, type ContainerModule } from 'inversify';
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { Redis } from 'ioredis';
import {
  memoryStorage,
  postgresStorage,
  sqliteStorage,
  TOKENS,
  Waypoint,
  type CheckpointStore,
  type GroupCommitOptions,
  type Logger,
  type StepAppend,
  type Telemetry,
  type WaypointOptions,
} from '../src/index';
import { redisStorage } from '../src/entry/redis';
import { tieredStorage } from '../src/entry/tiered';
import { CallCounter, countingStore } from './instruments';
import { MetricsTelemetry } from './observers';

/**
 * Where the bench runs and how it cleans up: every bench process gets its own PostgreSQL schemas
 * (`wpb_<pid>_<random>_<name>`), its own SQLite temp directory and its own Redis key prefix, all removed
 * at the end (and schemas of bench processes that died are dropped at the next start).
 */

export type Backend = 'memory' | 'sqlite' | 'postgres' | 'redis' | 'tiered';

/** Lease settings of every bench Waypoint: renewal really runs (every 250 ms) inside measured rounds. */
export const BENCH_LEASE: Pick<WaypointOptions, 'leaseTtlMs' | 'heartbeatMs'> = { leaseTtlMs: 3000, heartbeatMs: 250 };

/** A Waypoint made by the bench, with what it counts through. */
export interface BenchWaypoint {
  waypoint: Waypoint;
  /** Store calls, counted under the runtime (below encryption, when on). */
  calls: CallCounter;
  telemetry: Telemetry;
  /** The store as bound in the container (the counting proxy). */
  store: CheckpointStore;
  /**
   * Drops a measured run's data once its figures are taken, on the memory store only: its rows live in
   * this process's heap, so runs kept from earlier rounds made every later step pay for collecting
   * them (scavenges of 8-11 ms), which no step of a durable store pays. A no-op on the other backends.
   */
  forget(runId: string): Promise<void>;
}

/** How a bench Waypoint differs from the defaults. */
export interface WaypointSetup {
  /** Distinguishes stores of one backend (schema / file / prefix suffix). Default 'main'. */
  name?: string;
  telemetry?: Telemetry;
  /** Bound as TOKENS.Logger; omitted, Waypoint.create binds its default. */
  logger?: Logger;
  options?: WaypointOptions;
  poolSize?: number;
  /** PostgreSQL group commit (`postgresStorage({ groupCommit })`); default: the store's default (on). */
  groupCommit?: GroupCommitOptions | false;
  /**
   * Hides the store's run-stream capability (`appendEvents`, `readEvents`, `waitForEvents`,
   * `streamLength`, `dropStream` read as absent), as a user's store without them: the runtime writes no
   * stream at all. For the "a step that emits nothing costs what it costs without streams" figure.
   */
  hideStreams?: boolean;
  /** Awaited after each `appendStep` of the store (the runtime waits for it): a floor write, for a lower bound. */
  afterAppend?: (append: StepAppend) => Promise<unknown>;
}

/**
 * @example
 * const env = new BenchEnvironment();
 * try { const bw = await env.waypoint('postgres', { name: 'seq' }); ... } finally { await env.cleanup(); }
 */
export class BenchEnvironment {
  readonly id = `${process.pid}_${randomBytes(3).toString('hex')}`;
  readonly pgUrl = process.env.WAYPOINT_BENCH_PG_URL ?? process.env.WAYPOINT_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  readonly redisUrl = process.env.WAYPOINT_BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  private readonly schemas = new Set<string>();
  private readonly prefixes = new Set<string>();
  private readonly waypoints: Waypoint[] = [];
  private dir: string | null = null;

  /** A schema name owned by this bench process (created by whoever uses it, dropped by `cleanup`). */
  pgSchema(name: string): string {
    const schema = `wpb_${this.id}_${name}`.toLowerCase();
    this.schemas.add(schema);
    return schema;
  }

  /** A fresh file path in this process's temp directory. */
  sqlitePath(name: string): string {
    this.dir ??= mkdtempSync(path.join(tmpdir(), 'waypoint-bench-'));
    return path.join(this.dir, `${name}.db`);
  }

  redisPrefix(name: string): string {
    const prefix = `wpbench:${this.id}:${name}:`;
    this.prefixes.add(prefix);
    return prefix;
  }

  /** A Waypoint on `backend`, with a counting store, the given telemetry (default: metrics) and lease renewal on. */
  async waypoint(backend: Backend, setup: WaypointSetup = {}): Promise<BenchWaypoint> {
    const name = setup.name ?? 'main';
    const container = new Container();
    container.load(this.storageModule(backend, name, setup.poolSize, setup.groupCommit));
    const calls = new CallCounter();
    const inner = container.get<CheckpointStore>(TOKENS.CheckpointStore);
    const afterAppend = setup.afterAppend;
    if (afterAppend) {
      const append = inner.appendStep.bind(inner);
      inner.appendStep = async (a) => void (await append(a), await afterAppend(a));
    }
    const counted = countingStore(inner, calls);
    const store = setup.hideStreams ? withoutStreams(counted) : counted;
    container.rebind(TOKENS.CheckpointStore).toConstantValue(store);
    const telemetry = setup.telemetry ?? new MetricsTelemetry();
    container.bind(TOKENS.Telemetry).toConstantValue(telemetry);
    if (setup.logger) container.bind(TOKENS.Logger).toConstantValue(setup.logger);
    const waypoint = await Waypoint.create({ container, ...BENCH_LEASE, ...setup.options });
    this.waypoints.push(waypoint);
    const forget = backend === 'memory' ? (runId: string) => inner.deleteRun(runId) : () => Promise.resolve();
    return { waypoint, calls, telemetry, store, forget };
  }

  private storageModule(backend: Backend, name: string, poolSize?: number, groupCommit?: GroupCommitOptions | false): ContainerModule {
    switch (backend) {
      case 'memory':
        return memoryStorage();
      case 'sqlite':
        return sqliteStorage({ path: this.sqlitePath(name) });
      case 'postgres':
        return postgresStorage({ url: this.pgUrl, schema: this.pgSchema(name), poolSize, ...(groupCommit === undefined ? {} : { groupCommit }) });
      case 'redis':
        return redisStorage({ url: this.redisUrl, keyPrefix: this.redisPrefix(name) });
      case 'tiered':
        // Write-through: the PostgreSQL commit is on every step's path, Redis is updated after it.
        return tieredStorage({ redis: { url: this.redisUrl, keyPrefix: this.redisPrefix(name) }, postgres: { url: this.pgUrl, schema: this.pgSchema(name), poolSize } });
    }
  }

  /** Closes every Waypoint, drops the schemas, deletes the prefixed Redis keys and the temp directory. */
  async cleanup(): Promise<void> {
    for (const waypoint of this.waypoints.splice(0)) await waypoint.close().catch(() => undefined);
    if (this.schemas.size > 0) await dropSchemas(this.pgUrl, [...this.schemas]).catch((e) => warn(`could not drop bench schemas: ${String(e)}`));
    if (this.prefixes.size > 0) await deletePrefixes(this.redisUrl, [...this.prefixes]).catch((e) => warn(`could not delete bench Redis keys: ${String(e)}`));
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.schemas.clear();
    this.prefixes.clear();
    this.dir = null;
  }

  /** Drops `wpb_<pid>_...` schemas left by bench processes on this host that no longer exist. */
  async sweepStale(): Promise<void> {
    const client = new Client({ connectionString: this.pgUrl });
    await client.connect();
    try {
      const { rows } = await client.query<{ nspname: string }>(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'wpb\\_%'`);
      const stale = rows.map((r) => r.nspname).filter((s) => !processAlive(Number(s.split('_')[1])));
      for (const schema of stale) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await client.end();
    }
  }
}

const STREAM_METHODS: ReadonlySet<PropertyKey> = new Set(['appendEvents', 'readEvents', 'waitForEvents', 'streamLength', 'dropStream']);

/** `store` with its run-stream methods reading as absent (see `WaypointSetup.hideStreams`). */
function withoutStreams(store: CheckpointStore): CheckpointStore {
  return new Proxy(store, {
    get: (target, property) => (STREAM_METHODS.has(property) ? undefined : (Reflect.get(target, property, target) as unknown)),
    has: (target, property) => !STREAM_METHODS.has(property) && Reflect.has(target, property),
  });
}

/** Describes where the bench ran, for the report header. */
export function machineLine(env: BenchEnvironment): string {
  return `host ${hostname()}, node ${process.version}, PostgreSQL ${env.pgUrl.replace(/\/\/[^@]*@/, '//')}, Redis ${env.redisUrl}`;
}

async function dropSchemas(url: string, schemas: string[]): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    for (const schema of schemas) await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

/** SCAN (never KEYS) each prefix and unlink what it finds. Prefixes hold no glob characters. */
async function deletePrefixes(url: string, prefixes: string[]): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  redis.on('error', () => {}); // a failed connect rejects connect(); the event would only add noise
  await redis.connect();
  try {
    for (const prefix of prefixes) {
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        if (keys.length > 0) await redis.unlink(...keys);
        cursor = next;
      } while (cursor !== '0');
    }
  } finally {
    redis.disconnect();
  }
}

function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return true; // not ours to judge
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** A bench warning on stderr (never on stdout, which `--json` keeps clean). */
function warn(message: string): void {
  process.stderr.write(`bench: ${message}\n`);
}
