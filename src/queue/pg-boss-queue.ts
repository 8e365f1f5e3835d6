import { ContainerModule } from 'inversify';
import type PgBoss from 'pg-boss';
import type { Pool, PoolClient } from 'pg';
import { pg, pgBoss } from '../storage/drivers';
import { WaypointError, describeError } from '../contract/errors';
import { JsonLogger, type Logger } from '../contract/logger';
import { unavailable } from './errors';
import { RUN_QUEUE, RunQueue, parseRunJob, requeueIdFor, type ActiveJob, type Delivery, type QueueCounts, type RunJob, type SendOptions } from '../contract/run-queue';

/** Options of {@link pgBossQueue}. */
export interface PgBossQueueOptions {
  /** PostgreSQL connection string (the store's database is a fine place for it). */
  url: string;
  /** Schema of pg-boss's tables, created and migrated on start under pg-boss's advisory lock. Default 'pgboss'. */
  schema?: string;
  /** Pooled connections of this process. Default 4. */
  poolSize?: number;
  /**
   * How long a delivery may stay active before pg-boss expires it and hands it out again: the upper bound
   * on how long a dead worker's run waits for the queue alone (the orphan sweep usually acts sooner, after
   * the lease TTL). A live run that outlasts it is handed out again, found locked, and parked until its
   * lease expires. Default 900 (pg-boss's own default).
   */
  expireInSeconds?: number;
  /** Period of pg-boss's maintenance (expiry, archiving), taken by one process at a time. Default 60. */
  maintenanceIntervalSeconds?: number;
  /** Deliveries of one job before pg-boss gives up on it (expiries and failures both count). Default 20. */
  retryLimit?: number;
  /** Delay before a failed or expired job is handed out again. Default 1. */
  retryDelaySeconds?: number;
  /** Where pg-boss's own errors are logged. Default: the JSON logger on stderr. */
  logger?: Logger;
}

interface PgBossDelivery extends Delivery {
  readonly retryLimit: number;
}

/**
 * The pg-boss (PostgreSQL) binding of `RunQueue`. Each pipeline gets a standard-policy queue; jobs carry a
 * deterministic id (the primary key makes a second send of the same run a no-op: pg-boss's `singletonKey`
 * dedups only with `singletonSeconds` or with the short/singleton/stately policies, whose unique indexes
 * can stall fetching and expiry (pg-boss #492, #535), so the key is recorded but the id decides).
 * A requeue inserts the continuation job and completes the current one in one transaction.
 *
 * Limit: pg-boss 10 has no per-delivery token, so a worker whose delivery already expired can still
 * complete the job's next delivery. The run lease keeps execution single either way; if that next
 * worker then dies, the orphan sweep (not the queue) recovers the run.
 *
 * @example
 * const queue = new PgBossRunQueue({ url: DATABASE_URL, schema: 'pgboss', expireInSeconds: 300 });
 * const worker = await startWorker(waypoint, { pipelines: [Report], queue });
 */
export class PgBossRunQueue extends RunQueue {
  readonly kind = 'pg-boss';
  private readonly pool: Pool;
  private readonly boss: PgBoss;
  private readonly logger: Logger;
  private readonly queues = new Map<string, Promise<void>>();
  private starting: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly options: PgBossQueueOptions) {
    super();
    if (typeof options?.url !== 'string' || options.url === '') throw new WaypointError('INVALID_ARGUMENT', 'pgBossQueue({ url }) needs a PostgreSQL connection string.');
    checkPositive('expireInSeconds', options.expireInSeconds);
    checkPositive('maintenanceIntervalSeconds', options.maintenanceIntervalSeconds);
    checkPositive('poolSize', options.poolSize);
    this.logger = options.logger ?? new JsonLogger();
    this.pool = new (pg().Pool)({ connectionString: options.url, max: options.poolSize ?? 4, application_name: 'waypoint-pgboss' });
    this.pool.on('error', (error) => this.logger.warn('pg-boss pool connection error', { error: describeError(error) }));
    const pool = this.pool;
    this.boss = new (pgBoss())({
      db: { executeSql: (text: string, values: unknown[]) => pool.query(text, values) },
      schema: options.schema ?? 'pgboss',
      schedule: false,
      supervise: true,
      maintenanceIntervalSeconds: options.maintenanceIntervalSeconds ?? 60,
    });
    this.boss.on('error', (error) => this.logger.warn('pg-boss error', { error: describeError(error) }));
  }

  start(): Promise<void> {
    if (this.closed) return Promise.reject(new WaypointError('QUEUE_CLOSED', 'The pg-boss run queue was closed; create a new one.'));
    this.starting ??= this.boss.start().then(
      () => undefined,
      (error: unknown) => {
        this.starting = null;
        throw unavailable('start', error);
      },
    );
    return this.starting;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.starting) await this.starting.catch(() => undefined);
    await this.boss.stop({ graceful: false, close: false }).catch(() => undefined);
    await this.pool.end().catch(() => undefined);
  }

  async send(queue: string, job: RunJob, options: SendOptions): Promise<boolean> {
    await this.ensureQueue(queue);
    const id = await this.call('send', () =>
      this.boss.send(queue, { ...job }, { id: options.id, priority: options.priority ?? 0, singletonKey: job.runId, startAfter: seconds(options.delayMs) }),
    );
    if (id !== null) return true;
    // pg-boss answers null both for "already there" and for a queue that does not exist: tell them apart.
    if (await this.find(queue, options.id)) return false;
    throw new WaypointError(
      'QUEUE_SEND_FAILED',
      `The pg-boss queue did not accept the job for run '${job.runId}' on queue '${queue}' and holds no job with id ${options.id}. Check that the queue exists in schema '${this.options.schema ?? 'pgboss'}'.`,
      { runId: job.runId },
    );
  }

  async find(queue: string, id: string): Promise<RunJob | null> {
    await this.ensureQueue(queue);
    const job = await this.call('getJobById', () => this.boss.getJobById<RunJob>(queue, id));
    return job ? parseRunJob(job.data, `${id} on ${queue}`) : null;
  }

  async fetch(queue: string, limit: number): Promise<Delivery[]> {
    if (limit <= 0) return [];
    await this.ensureQueue(queue);
    const jobs = await this.call('fetch', () => this.boss.fetch<RunJob>(queue, { batchSize: limit, includeMetadata: true }));
    const deliveries: PgBossDelivery[] = [];
    for (const job of jobs) {
      try {
        deliveries.push({
          id: job.id,
          queue,
          job: parseRunJob(job.data, `${job.id} on ${queue}`),
          priority: job.priority,
          redeliveries: job.retryCount,
          retryLimit: job.retryLimit,
        });
      } catch (error) {
        // A foreign job in our queue would be handed out again and again: cancel it, loudly.
        this.logger.error('foreign job in a Waypoint queue; cancelling it', { queue, jobId: job.id, error: describeError(error) });
        await this.call('cancel', () => this.boss.cancel(queue, job.id));
      }
    }
    return deliveries;
  }

  async complete(delivery: Delivery, output: Record<string, unknown>): Promise<void> {
    await this.call('complete', () => this.boss.complete(delivery.queue, delivery.id, output));
  }

  async requeue(delivery: Delivery, delayMs: number, reason: string): Promise<void> {
    const client = await this.call('connect', () => this.pool.connect());
    const db = { executeSql: (text: string, values: unknown[]) => client.query(text, values) };
    try {
      await client.query('BEGIN');
      await this.boss.send(
        delivery.queue,
        { ...delivery.job },
        { id: requeueIdFor(delivery.id), priority: delivery.priority, singletonKey: delivery.job.runId, startAfter: seconds(delayMs), db },
      );
      await this.boss.complete(delivery.queue, delivery.id, { requeued: true, reason }, { db });
      await client.query('COMMIT');
    } catch (error) {
      await rollback(client);
      throw unavailable('requeue', error);
    } finally {
      client.release();
    }
  }

  async fail(delivery: Delivery, error: Error): Promise<void> {
    await this.call('fail', () => this.boss.fail(delivery.queue, delivery.id, { error: describeError(error) }));
  }

  async counts(queue: string): Promise<QueueCounts> {
    await this.ensureQueue(queue);
    const [all, active] = await Promise.all([
      this.call('getQueueSize', () => this.boss.getQueueSize(queue, { before: 'completed' })),
      this.call('getQueueSize', () => this.boss.getQueueSize(queue, { before: 'active' })),
    ]);
    return { queued: active, active: all - active };
  }

  /**
   * pg-boss 10 has no API that lists active jobs, so this reads its job table (stable across 10.x: `name`,
   * `state`, `started_on`, `data`). Ages are on the database clock, like pg-boss's own expiry.
   */
  override async activeJobs(queue: string, olderThanMs: number, limit: number): Promise<ActiveJob[]> {
    await this.ensureQueue(queue);
    const schema = `"${(this.options.schema ?? 'pgboss').replace(/"/g, '""')}"`;
    const { rows } = await this.call('list active jobs', () =>
      this.pool.query<{ id: string; data: unknown; priority: number; active_ms: string }>(
        `SELECT id, data, priority, (EXTRACT(EPOCH FROM (now() - started_on)) * 1000)::bigint AS active_ms FROM ${schema}.job
          WHERE name = $1 AND state = 'active' AND started_on <= now() - make_interval(secs => $2)
          ORDER BY started_on LIMIT $3`,
        [queue, Math.max(0, olderThanMs) / 1000, limit],
      ),
    );
    const jobs: ActiveJob[] = [];
    for (const row of rows) {
      try {
        jobs.push({ id: row.id, queue, job: parseRunJob(row.data, `${row.id} on ${queue}`), priority: row.priority, activeForMs: Number(row.active_ms) });
      } catch {
        // A foreign job is cancelled when it is fetched; it names no run to recover.
      }
    }
    return jobs;
  }

  /** Creates the pipeline's queue once per process (pg-boss 10 drops jobs sent to a missing queue). */
  private ensureQueue(queue: string): Promise<void> {
    let ready = this.queues.get(queue);
    if (!ready) {
      ready = this.start().then(() =>
        this.call('createQueue', () =>
          // Workers and fanning-out parents create the same queue at once: PostgreSQL can pick one of them
          // as a deadlock victim (or see the other's row appear), which is not an outage. Try again.
          retryTransient(() =>
            this.boss.createQueue(queue, {
              name: queue,
              policy: 'standard',
              retryLimit: this.options.retryLimit ?? 20,
              retryDelay: this.options.retryDelaySeconds ?? 1,
              expireInSeconds: this.options.expireInSeconds ?? 900,
            }),
          ),
        ),
      );
      ready.catch(() => this.queues.delete(queue));
      this.queues.set(queue, ready);
    }
    return ready;
  }

  private async call<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    await this.start();
    try {
      return await fn();
    } catch (error) {
      throw unavailable(operation, error);
    }
  }
}

/**
 * Binds the pg-boss run queue (PostgreSQL) as `RUN_QUEUE`: the default fleet binding next to the
 * PostgreSQL store. The queue starts on first use; close it with `closeQueue(waypoint)`.
 *
 * @example
 * const waypoint = await Waypoint.create({
 *   modules: [postgresStorage({ url: DATABASE_URL }), pgBossQueue({ url: DATABASE_URL, schema: 'pgboss' })],
 * });
 */
export function pgBossQueue(options: PgBossQueueOptions): ContainerModule {
  const queue = new PgBossRunQueue(options);
  return new ContainerModule(({ bind }) => {
    bind(RUN_QUEUE).toConstantValue(queue);
  });
}

function seconds(ms: number | undefined): number | undefined {
  // pg-boss takes a relative start as seconds on the database clock, so no host clock skew enters.
  return ms === undefined || ms <= 0 ? undefined : Math.max(0.001, ms / 1000);
}

function checkPositive(name: string, value: number | undefined): void {
  if (value !== undefined && !(Number.isFinite(value) && value > 0)) {
    throw new WaypointError('INVALID_ARGUMENT', `pgBossQueue option ${name} must be a positive number, got ${JSON.stringify(value)}.`);
  }
}

async function rollback(client: PoolClient): Promise<void> {
  try {
    await client.query('ROLLBACK');
  } catch {
    // The connection is broken; releasing it discards the transaction anyway.
  }
}

/** PostgreSQL errors that a concurrent creator causes: deadlock victim, serialization failure, a row that appeared meanwhile. */
const TRANSIENT_CODES = new Set(['40P01', '40001', '23505']);

/** Runs `fn`, again (up to 5 attempts, 20-160 ms apart with jitter) while it fails with a transient PostgreSQL error. */
async function retryTransient<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      if (attempt >= 5 || typeof code !== 'string' || !TRANSIENT_CODES.has(code)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 * 2 ** (attempt - 1) * (0.5 + Math.random() / 2)));
    }
  }
}
