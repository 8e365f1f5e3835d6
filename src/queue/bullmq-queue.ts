import { randomUUID } from 'node:crypto';
import { ContainerModule } from 'inversify';
import type { Job, Queue, Worker } from 'bullmq';
import type IORedis from 'ioredis';
import { bullmq, ioredis } from '../storage/drivers';
import { WaypointError, describeError } from '../contract/errors';
import { JsonLogger, type Logger } from '../contract/logger';
import { unavailable } from './errors';
import { RUN_QUEUE, RunQueue, parseRunJob, type ActiveJob, type Delivery, type QueueCounts, type RunJob, type SendOptions } from '../contract/run-queue';

/** Options of {@link bullmqQueue}. */
export interface BullMqQueueOptions {
  /** Redis URL, e.g. `redis://127.0.0.1:6379/0`. */
  url: string;
  /** Prefix of every BullMQ key, to share a Redis with others. Default 'bull' (BullMQ's own). */
  prefix?: string;
  /**
   * How long a delivery's lock lives without renewal; the worker renews it every half of this. A dead
   * worker's job is handed out again by the stalled-job check once its lock has expired. Default 30000.
   */
  lockDurationMs?: number;
  /**
   * Period of the stalled-job check (one check per period over all workers). Default 15000, half of
   * BullMQ's own 30000, so that a dead worker's job is handed out again within lockDurationMs +
   * stalledIntervalMs = 45 s with the defaults, inside the fleet's 60 s bound even without the orphan sweep.
   */
  stalledIntervalMs?: number;
  /** Deliveries of one job after failures or stalls before BullMQ gives up on it. Default 20. */
  retryLimit?: number;
  /** Delay before a failed job is handed out again. Default 1000. */
  retryDelayMs?: number;
  /** Completed jobs are kept this long for inspection. Default 3600. */
  keepCompletedSeconds?: number;
  logger?: Logger;
}

interface BullDelivery extends Delivery {
  readonly bullJob: Job<RunJob>;
  readonly token: string;
  readonly renewal: NodeJS.Timeout;
}

/** BullMQ: 1 is the highest priority, 2^21 the lowest, 0 "none" (served before every prioritized job). */
const BULL_PRIORITY_ZERO = 1_048_576;

/**
 * The BullMQ (Redis) binding of `RunQueue`. Jobs are fetched manually (`Worker.getNextJob`), so one
 * dispatch loop serves both bindings; this class renews each delivery's lock itself and runs BullMQ's
 * stalled-job check. The job id is derived from the run (BullMQ ignores a second add with the same id);
 * a requeue moves the same job to the delayed set under its lock token, so a stale worker cannot settle
 * a job that was handed to another.
 *
 * @example
 * const queue = new BullMqRunQueue({ url: 'redis://127.0.0.1:6379', prefix: 'reports', lockDurationMs: 30_000 });
 * await enqueue(waypoint, Report, { runId: 'r-1', input, queue });
 */
export class BullMqRunQueue extends RunQueue {
  readonly kind = 'bullmq';
  private readonly redis: IORedis;
  private readonly logger: Logger;
  private readonly producers = new Map<string, Queue<RunJob>>();
  private readonly consumers = new Map<string, Worker<RunJob>>();
  private readonly live = new Set<BullDelivery>();
  private starting: Promise<void> | null = null;
  private closed = false;

  constructor(private readonly options: BullMqQueueOptions) {
    super();
    if (typeof options?.url !== 'string' || options.url === '') throw new WaypointError('INVALID_ARGUMENT', 'bullmqQueue({ url }) needs a Redis URL.');
    for (const name of ['lockDurationMs', 'stalledIntervalMs', 'retryDelayMs', 'keepCompletedSeconds'] as const) {
      const value = options[name];
      if (value !== undefined && !(Number.isFinite(value) && value > 0))
        throw new WaypointError('INVALID_ARGUMENT', `bullmqQueue option ${name} must be a positive number, got ${JSON.stringify(value)}.`);
    }
    this.logger = options.logger ?? new JsonLogger();
    // BullMQ needs maxRetriesPerRequest: null on connections its workers use.
    this.redis = new (ioredis().Redis)(options.url, { maxRetriesPerRequest: null, lazyConnect: true });
    this.redis.on('error', (error) => this.logger.warn('BullMQ redis connection error', { error: describeError(error) }));
  }

  start(): Promise<void> {
    if (this.closed) return Promise.reject(new WaypointError('QUEUE_CLOSED', 'The BullMQ run queue was closed; create a new one.'));
    this.starting ??= this.redis.connect().then(
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
    for (const delivery of this.live) clearInterval(delivery.renewal);
    this.live.clear();
    await Promise.all([...this.consumers.values()].map((worker) => worker.close(true).catch(() => undefined)));
    await Promise.all([...this.producers.values()].map((queue) => queue.close().catch(() => undefined)));
    if (this.starting) await this.redis.quit().catch(() => undefined);
    else this.redis.disconnect();
  }

  async send(queue: string, job: RunJob, options: SendOptions): Promise<boolean> {
    const producer = await this.producer(queue);
    const jobId = bullId(options.id);
    return this.call('add', async () => {
      // BullMQ keeps the first job under an id and ignores later adds; the look-up tells the caller which happened.
      if (await producer.getJob(jobId)) return false;
      await producer.add(
        'run',
        { ...job },
        {
          jobId,
          priority: BULL_PRIORITY_ZERO - (options.priority ?? 0),
          delay: options.delayMs && options.delayMs > 0 ? Math.ceil(options.delayMs) : undefined,
          attempts: (this.options.retryLimit ?? 20) + 1,
          backoff: { type: 'fixed', delay: this.options.retryDelayMs ?? 1000 },
          removeOnComplete: { age: this.options.keepCompletedSeconds ?? 3600 },
          removeOnFail: { age: 7 * 24 * 3600 },
        },
      );
      return true;
    });
  }

  async find(queue: string, id: string): Promise<RunJob | null> {
    const producer = await this.producer(queue);
    const job = await this.call('getJob', () => producer.getJob(bullId(id)));
    return job ? parseRunJob(job.data, `${id} on ${queue}`) : null;
  }

  async fetch(queue: string, limit: number): Promise<Delivery[]> {
    const consumer = await this.consumer(queue);
    const deliveries: Delivery[] = [];
    while (deliveries.length < limit && !this.closed) {
      const token = randomUUID();
      const job = await this.call('getNextJob', () => consumer.getNextJob(token, { block: false }));
      if (!job) break;
      let data: RunJob;
      try {
        data = parseRunJob(job.data, `${job.id} on ${queue}`);
      } catch (error) {
        this.logger.error('foreign job in a Waypoint queue; failing it', { queue, jobId: job.id, error: describeError(error) });
        job.discard(); // synchronous: marks the job so it is not retried
        await this.settle('moveToFailed', () => job.moveToFailed(error as Error, token, false), queue, job.id);
        continue;
      }
      const duration = this.options.lockDurationMs ?? 30_000;
      const delivery: BullDelivery = {
        id: job.id!,
        queue,
        job: data,
        priority: BULL_PRIORITY_ZERO - (job.opts.priority ?? BULL_PRIORITY_ZERO),
        redeliveries: Math.max(0, (job.attemptsStarted ?? 1) - 1),
        bullJob: job,
        token,
        renewal: setInterval(() => void this.renew(delivery, duration), Math.max(50, Math.floor(duration / 2))),
      };
      delivery.renewal.unref();
      this.live.add(delivery);
      deliveries.push(delivery);
    }
    return deliveries;
  }

  async complete(delivery: Delivery, output: Record<string, unknown>): Promise<void> {
    const d = this.release(delivery);
    await this.settle('moveToCompleted', () => d.bullJob.moveToCompleted(output, d.token, false), d.queue, d.id);
  }

  async requeue(delivery: Delivery, delayMs: number, reason: string): Promise<void> {
    const d = this.release(delivery);
    this.logger.debug('requeueing job', { queue: d.queue, jobId: d.id, runId: d.job.runId, delayMs, reason });
    await this.settle('moveToDelayed', () => d.bullJob.moveToDelayed(Date.now() + Math.max(1, Math.ceil(delayMs)), d.token), d.queue, d.id);
  }

  async fail(delivery: Delivery, error: Error): Promise<void> {
    const d = this.release(delivery);
    await this.settle('moveToFailed', () => d.bullJob.moveToFailed(error, d.token, false), d.queue, d.id);
  }

  async counts(queue: string): Promise<QueueCounts> {
    const producer = await this.producer(queue);
    const counts = await this.call('getJobCounts', () => producer.getJobCounts('waiting', 'prioritized', 'delayed', 'active'));
    return { queued: (counts.waiting ?? 0) + (counts.prioritized ?? 0) + (counts.delayed ?? 0), active: counts.active ?? 0 };
  }

  override async activeJobs(queue: string, olderThanMs: number, limit: number): Promise<ActiveJob[]> {
    const producer = await this.producer(queue);
    // The active list is as long as the fleet's concurrency, so reading it whole is cheap. Ages use the
    // fetching worker's clock (BullMQ's processedOn): the sweep's threshold is far above host skew.
    const active = await this.call('getActive', () => producer.getActive());
    const now = Date.now();
    const jobs: ActiveJob[] = [];
    for (const job of active) {
      const activeForMs = now - (job.processedOn ?? now);
      if (activeForMs < olderThanMs || job.id === undefined) continue;
      try {
        jobs.push({
          id: job.id,
          queue,
          job: parseRunJob(job.data, `${job.id} on ${queue}`),
          priority: BULL_PRIORITY_ZERO - (job.opts.priority ?? BULL_PRIORITY_ZERO),
          activeForMs,
        });
      } catch {
        // A foreign job is failed when it is fetched; it names no run to recover.
      }
    }
    return jobs.sort((a, b) => b.activeForMs - a.activeForMs).slice(0, limit);
  }

  private async producer(name: string): Promise<Queue<RunJob>> {
    await this.start();
    let queue = this.producers.get(name);
    if (!queue) {
      queue = new (bullmq().Queue)<RunJob>(name, { connection: this.redis, prefix: this.options.prefix });
      queue.on('error', (error) => this.logger.warn('BullMQ queue error', { queue: name, error: describeError(error) }));
      this.producers.set(name, queue);
    }
    return queue;
  }

  /** The manual-fetch worker of one queue, with BullMQ's stalled-job check running. */
  private async consumer(name: string): Promise<Worker<RunJob>> {
    await this.start();
    let worker = this.consumers.get(name);
    if (!worker) {
      worker = new (bullmq().Worker)<RunJob>(name, null, {
        connection: this.redis,
        prefix: this.options.prefix,
        autorun: false,
        lockDuration: this.options.lockDurationMs ?? 30_000,
        stalledInterval: this.options.stalledIntervalMs ?? 15_000,
        // Stalls are how a dead worker's job comes back; they must not exhaust it before retries do.
        maxStalledCount: this.options.retryLimit ?? 20,
      });
      worker.on('error', (error) => this.logger.warn('BullMQ worker error', { queue: name, error: describeError(error) }));
      this.consumers.set(name, worker);
      await this.call('startStalledCheckTimer', () => worker!.startStalledCheckTimer());
    }
    return worker;
  }

  private async renew(delivery: BullDelivery, duration: number): Promise<void> {
    if (!this.live.has(delivery)) return;
    try {
      const ok = await delivery.bullJob.extendLock(delivery.token, duration);
      if (!ok) {
        // The lock expired (this process stalled) and the job may be with another worker; the run lease
        // still decides who executes, so only stop renewing.
        this.logger.warn('BullMQ lock of a delivery lost', { queue: delivery.queue, jobId: delivery.id, runId: delivery.job.runId });
        this.release(delivery);
      }
    } catch (error) {
      this.logger.warn('BullMQ lock renewal failed; retrying on the next beat', { queue: delivery.queue, jobId: delivery.id, error: describeError(error) });
    }
  }

  private release(delivery: Delivery): BullDelivery {
    const d = delivery as BullDelivery;
    clearInterval(d.renewal);
    this.live.delete(d);
    return d;
  }

  /** Settles a job; a job whose lock this process lost belongs to another delivery now, so that is not an error. */
  private async settle(operation: string, fn: () => Promise<unknown>, queue: string, jobId: string | undefined): Promise<void> {
    try {
      await fn();
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (/missing lock|lock mismatch|not in the active state|missing key/i.test(message)) {
        this.logger.warn('job was no longer held by this delivery; left to its current holder', { queue, jobId, operation, error: message });
        return;
      }
      throw unavailable(operation, error);
    }
  }

  private async call<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw unavailable(operation, error);
    }
  }
}

/**
 * Binds the BullMQ run queue (Redis) as `RUN_QUEUE`: the alternative for Redis shops. Same fleet, same
 * guarantees; the run store stays wherever you keep it.
 *
 * @example
 * const waypoint = await Waypoint.create({
 *   modules: [postgresStorage({ url: DATABASE_URL }), bullmqQueue({ url: 'redis://127.0.0.1:6379', prefix: 'reports' })],
 * });
 */
export function bullmqQueue(options: BullMqQueueOptions): ContainerModule {
  const queue = new BullMqRunQueue(options);
  return new ContainerModule(({ bind }) => {
    bind(RUN_QUEUE).toConstantValue(queue);
  });
}

/** BullMQ custom ids may not contain ':' or look like integers: the uuid gets a prefix. */
function bullId(id: string): string {
  return `wp-${id}`;
}
