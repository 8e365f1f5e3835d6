import { Client, Pool } from 'pg';
import { Redis } from 'ioredis';
import type { BenchEnvironment } from './environment';
import BetterSqlite3 from 'better-sqlite3';

/**
 * The physical floors every figure is compared with, measured in the same process and run as the
 * figure: one single-row INSERT commit (autocommit) of the same payload on the same server, with the
 * fastest raw client use (a named prepared statement, one connection); a raw INSERT on SQLite with the
 * store's own pragmas (WAL, synchronous FULL); a raw SET on Redis.
 *
 * The floor table has the shape of a step row reduced to its essentials: a few key columns and the text
 * payload, primary key (run_id, sequence).
 */

/** One backend's floor: `batch(n)` writes n rows one commit each and returns µs per write. */
export interface Floor {
  readonly what: string;
  batch(n: number, payload: string): Promise<number>;
  /** One such write (one row of `run`), as `batch` does each: what a step must cost at least on this backend. */
  write?(run: string, sequence: number, payload: string): Promise<void>;
  close(): Promise<void>;
}

export const PG_TABLE = (schema: string) => `"${schema}".floor_steps`;

export function pgCreateTable(schema: string): string[] {
  return [
    `CREATE SCHEMA IF NOT EXISTS "${schema}"`,
    `CREATE TABLE IF NOT EXISTS ${PG_TABLE(schema)} (
  run_id text NOT NULL, sequence integer NOT NULL, step_name text NOT NULL, payload text NOT NULL,
  completed_at timestamptz(3) NOT NULL DEFAULT now(), PRIMARY KEY (run_id, sequence))`,
  ];
}

let batches = 0;
/** A fresh key per batch, so every batch inserts new rows (as steps do) and never conflicts. */
function nextRunKey(): string {
  batches += 1;
  return `floor-${process.pid}-${batches}`;
}

/** @example const floor = await PgFloor.open(env); const usPerInsert = await floor.batch(100, payload); */
export class PgFloor implements Floor {
  readonly what = 'pg INSERT commit';
  private constructor(
    private readonly client: Client,
    private readonly schema: string,
  ) {}

  static async open(env: BenchEnvironment): Promise<PgFloor> {
    const schema = env.pgSchema('floor');
    const client = new Client({ connectionString: env.pgUrl, application_name: 'waypoint-bench-floor' });
    await client.connect();
    for (const sql of pgCreateTable(schema)) await client.query(sql);
    return new PgFloor(client, schema);
  }

  async batch(n: number, payload: string): Promise<number> {
    const run = nextRunKey();
    const start = performance.now();
    for (let i = 1; i <= n; i++) await this.write(run, i, payload);
    return ((performance.now() - start) * 1000) / n;
  }

  async write(run: string, sequence: number, payload: string): Promise<void> {
    const text = `INSERT INTO ${PG_TABLE(this.schema)} (run_id, sequence, step_name, payload) VALUES ($1, $2, $3, $4)`;
    await this.client.query({ name: 'floor_insert', text, values: [run, sequence, `s${sequence}`, payload] });
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}

/** `workers` clients each doing `perWorker` INSERT commits through one pool of `poolSize`. */
export class PgPoolFloor {
  readonly what = 'pg INSERT commits through a pool';
  private constructor(
    private readonly pool: Pool,
    private readonly schema: string,
  ) {}

  static async open(env: BenchEnvironment, poolSize: number): Promise<PgPoolFloor> {
    const schema = env.pgSchema('poolfloor');
    const pool = new Pool({ connectionString: env.pgUrl, max: poolSize, application_name: 'waypoint-bench-floor' });
    for (const sql of pgCreateTable(schema)) await pool.query(sql);
    return new PgPoolFloor(pool, schema);
  }

  /** Returns inserts per second over all workers. */
  async throughput(workers: number, perWorker: number, payload: string): Promise<number> {
    const text = `INSERT INTO ${PG_TABLE(this.schema)} (run_id, sequence, step_name, payload) VALUES ($1, $2, $3, $4)`;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: workers }, async () => {
        const run = nextRunKey();
        for (let i = 1; i <= perWorker; i++) await this.pool.query({ name: 'floor_insert', text, values: [run, i, `s${i}`, payload] });
      }),
    );
    return (workers * perWorker) / ((performance.now() - start) / 1000);
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** The slice of better-sqlite3 used here (the package ships no types). */
export interface SqliteDatabase {
  pragma(sql: string): unknown;
  exec(sql: string): void;
  prepare(sql: string): { run(...params: unknown[]): { changes: number } };
  close(): void;
}

/** The pragmas `sqliteStorage()` sets on its connection by default (docs: WAL, `synchronous: 'FULL'`, a 5 s busy timeout), in its order. */
export const STORE_SQLITE_PRAGMAS = ['journal_mode = WAL', 'synchronous = FULL', 'busy_timeout = 5000'] as const;

/** A better-sqlite3 connection to `path` with the store's default pragmas (WAL, synchronous FULL, busy timeout). */
export function openSqlite(path: string): SqliteDatabase {
  const Database = BetterSqlite3 as new (file: string) => SqliteDatabase;
  const db = new Database(path);
  for (const pragma of STORE_SQLITE_PRAGMAS) db.pragma(pragma);
  return db;
}

/** @example const floor = SqliteFloor.open(env); await floor.batch(100, payload); */
export class SqliteFloor implements Floor {
  readonly what = 'better-sqlite3 INSERT (WAL, FULL)';
  private readonly insert: { run(...params: unknown[]): unknown };

  private constructor(private readonly db: SqliteDatabase) {
    this.insert = db.prepare('INSERT INTO floor_steps (run_id, sequence, step_name, payload, completed_at) VALUES (?, ?, ?, ?, ?)');
  }

  static open(env: BenchEnvironment): SqliteFloor {
    const db = openSqlite(env.sqlitePath('floor'));
    db.exec(`CREATE TABLE IF NOT EXISTS floor_steps (
  run_id TEXT NOT NULL, sequence INTEGER NOT NULL, step_name TEXT NOT NULL, payload TEXT NOT NULL,
  completed_at INTEGER NOT NULL, PRIMARY KEY (run_id, sequence)) STRICT`);
    return new SqliteFloor(db);
  }

  batch(n: number, payload: string): Promise<number> {
    const run = nextRunKey();
    const start = performance.now();
    for (let i = 1; i <= n; i++) this.insert.run(run, i, `s${i}`, payload, Date.now());
    return Promise.resolve(((performance.now() - start) * 1000) / n);
  }

  write(run: string, sequence: number, payload: string): Promise<void> {
    this.insert.run(run, sequence, `s${sequence}`, payload, Date.now());
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }
}

/** @example const floor = await RedisFloor.open(env); await floor.batch(100, payload); */
export class RedisFloor implements Floor {
  readonly what = 'Redis SET';
  private constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  static async open(env: BenchEnvironment): Promise<RedisFloor> {
    const redis = new Redis(env.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
    redis.on('error', () => {}); // failures reach the caller through the rejected command
    await redis.connect();
    return new RedisFloor(redis, env.redisPrefix('floor'));
  }

  async batch(n: number, payload: string): Promise<number> {
    const run = nextRunKey();
    const start = performance.now();
    for (let i = 1; i <= n; i++) await this.redis.set(`${this.prefix}${run}:${i}`, payload);
    return ((performance.now() - start) * 1000) / n;
  }

  async write(run: string, sequence: number, payload: string): Promise<void> {
    await this.redis.set(`${this.prefix}${run}:${sequence}`, payload);
  }

  async close(): Promise<void> {
    await this.redis.quit();
  }
}
