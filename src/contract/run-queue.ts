import type { ServiceIdentifier } from 'inversify';
import { createHash } from 'node:crypto';
import { WaypointError } from './errors';
import type { RunRecord } from './checkpoint-store';

/**
 * What a job is, and so what it may do to its run (see {@link jobBlocker}):
 *
 * - `enqueue`: the user's `enqueue` of a new, paused, waiting or running run;
 * - `retry`: the user's `enqueue` of a `failed` run: the only delivery that runs a failed run again;
 * - `wake`: the runtime waking a parent waiting for its fleet children;
 * - `recover`: the orphan sweep re-queueing a run whose executor is gone.
 *
 * Every kind but `retry` is a delivery the runtime made for itself: finding its run failed, cancelled or
 * completed, it settles without running anything.
 */
export type RunJobKind = 'enqueue' | 'retry' | 'wake' | 'recover';

const JOB_KINDS: readonly RunJobKind[] = ['enqueue', 'retry', 'wake', 'recover'];

/**
 * The payload of one queue job: "advance run `runId`". It carries no input or state: the run row, created
 * (and validated, and encrypted if the store encrypts) at enqueue time, is the only copy of the input.
 */
export interface RunJob {
  runId: string;
  /** Recorded pipeline name; selects the worker's pipeline class. */
  pipeline: string;
  /**
   * The run's lease epoch when the job was sent. A `failed` or `waiting` run is advanced only while its
   * epoch is still this one (nobody has executed it since it was enqueued), so a redelivered job never
   * retries a run that already failed under it.
   */
  epoch: number;
  /** Optional concurrency group (a tenant, a customer): see `WorkerOptions.groupConcurrency`. */
  group?: string;
  /** ISO time of the enqueue, for logs and `job` introspection. */
  enqueuedAt: string;
  /**
   * Set on the job that wakes a parent waiting for its fleet children (with `kind: 'wake'`, and kept so a
   * worker of the release before `kind` reads it as a wake too). Found locked (the parent's own execution
   * is just ending), it is tried again within a second instead of at the lease's expiry.
   */
  wake?: boolean;
  /**
   * What the job is (see {@link RunJobKind}); every job this release sends has one. A job without it was
   * sent by an earlier release: a `wake` one is read as a wake-up, any other keeps the earlier rule (it
   * may run a failed run whose epoch is still its own), since it may be a user's retry.
   */
  kind?: RunJobKind;
  /** Set on the copy the orphan sweep sent in place of this stuck job id; the copy stands in for it (same kind and epoch). */
  redispatchOf?: string;
}

/** Options of one `RunQueue.send`. */
export interface SendOptions {
  /** Deterministic job id: a second send with the same id is a no-op while the first job is kept. */
  id: string;
  /** Higher runs first. Integer in [-1_000_000, 1_000_000]. Default 0. */
  priority?: number;
  /** Not before this many ms from now. */
  delayMs?: number;
}

/** One job handed to this process by `fetch`; settle it with exactly one of complete / requeue / fail. */
export interface Delivery {
  readonly id: string;
  readonly queue: string;
  readonly job: RunJob;
  readonly priority: number;
  /** Times this job was handed out before (redelivery after expiry, stall or failure). */
  readonly redeliveries: number;
}

/** What a queue holds for one queue name, by state. */
export interface QueueCounts {
  /** Ready or scheduled for later. */
  queued: number;
  /** Handed to a worker and not settled. */
  active: number;
}

/** A job a worker took from the queue and has not settled, as the recovery sweep sees it. */
export interface ActiveJob {
  readonly id: string;
  readonly queue: string;
  readonly job: RunJob;
  /** Waypoint priority of the job (higher first). */
  readonly priority: number;
  /** How long ago the job was handed out (by the queue's clock where it has one). */
  readonly activeForMs: number;
}

/**
 * The contract the fleet needs from a job queue. Two bindings implement it: `pgBossQueue` (PostgreSQL,
 * the default next to the PostgreSQL store) and `bullmqQueue` (Redis); the same test suite runs against
 * both. A job is only a delivery of "advance this run": the run lease and its fencing decide who executes,
 * so a duplicate or late delivery is harmless (it finds the run locked, finished, or moves it on).
 *
 * Liveness: a delivery whose worker dies is handed out again by the queue's own mechanism (pg-boss job
 * expiry, BullMQ lock/stall detection), which can be slow (pg-boss: 15 minutes by default). The orphan
 * sweep does not wait for it: it reads the run rows, and `activeJobs` shows it deliveries held for long
 * whose run nobody leased (the worker died between dequeue and lease), which it re-dispatches.
 * `requeue` gives a job back atomically (a new attempt later, the current one settled), which is how a
 * worker yields a locked run or pauses on shutdown.
 *
 * @example
 * const queue = new PgBossRunQueue({ url });
 * const [delivery] = await queue.fetch(queueNameFor('waypoint', 'report'), 1);
 * if (delivery) await queue.complete(delivery, { outcome: 'advanced' });
 */
export abstract class RunQueue {
  /** 'pg-boss' or 'bullmq', for messages and metrics. */
  abstract readonly kind: string;

  /** Connects (and installs the queue's schema). Idempotent; every other method calls it first. */
  abstract start(): Promise<void>;
  /** Closes connections. Unsettled deliveries of this process are handed out again after their expiry. */
  abstract close(): Promise<void>;

  /** Sends a job; false (and nothing changes) when a job with `options.id` already exists. */
  abstract send(queue: string, job: RunJob, options: SendOptions): Promise<boolean>;
  /** The job with this id while the queue still holds it (queued, active, or kept after completion). */
  abstract find(queue: string, id: string): Promise<RunJob | null>;
  /** Takes up to `limit` ready jobs for this process. Never blocks. */
  abstract fetch(queue: string, limit: number): Promise<Delivery[]>;
  /** Marks the delivery done; `output` is kept with the job for inspection. */
  abstract complete(delivery: Delivery, output: Record<string, unknown>): Promise<void>;
  /** Settles the delivery and makes the same job ready again after `delayMs`, atomically. */
  abstract requeue(delivery: Delivery, delayMs: number, reason: string): Promise<void>;
  /** Fails the delivery; the queue retries it (after its retry delay) until its retry limit. */
  abstract fail(delivery: Delivery, error: Error): Promise<void>;
  /** Queued and active jobs of one queue name. */
  abstract counts(queue: string): Promise<QueueCounts>;

  /**
   * Jobs of `queue` handed out at least `olderThanMs` ago and not settled, oldest first, at most `limit`.
   * The orphan sweep uses it to find a run whose worker died after dequeue and before leasing it. This
   * default lists nothing (a custom queue without it recovers such runs only through its own redelivery);
   * both bundled bindings implement it.
   */
  activeJobs(queue: string, olderThanMs: number, limit: number): Promise<ActiveJob[]> {
    void queue;
    void olderThanMs;
    void limit;
    return Promise.resolve([]);
  }
}

/**
 * Service identifier of the `RunQueue` binding. `pgBossQueue(...)` / `bullmqQueue(...)` bind it; rebind it
 * to use your own implementation.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [postgresStorage({ url }), pgBossQueue({ url })] });
 * const queue = waypoint.container.get(RUN_QUEUE);
 */
export const RUN_QUEUE = Symbol.for('waypoint:RunQueue') as ServiceIdentifier<RunQueue>;

/** Default base name of the fleet's queues: runs of pipeline P go to queue `waypoint.P`. */
export const DEFAULT_QUEUE = 'waypoint';

/**
 * Queue name of one pipeline's runs: `${base}.${pipeline}`. Characters outside `[A-Za-z0-9_.-]` are
 * percent-encoded, so every pipeline name maps to a distinct name that pg-boss and BullMQ (no ':') accept.
 *
 * @example
 * queueNameFor('waypoint', 'financial-analysis') // 'waypoint.financial-analysis'
 */
export function queueNameFor(base: string, pipeline: string): string {
  if (typeof base !== 'string' || !/^[A-Za-z0-9_-]{1,60}$/.test(base)) {
    throw new WaypointError('INVALID_ARGUMENT', `Queue name '${String(base)}' is not usable: use 1-60 letters, digits, '_' or '-'.`);
  }
  const encoded = Array.from(Buffer.from(pipeline, 'utf8'))
    .map((byte) => {
      const char = String.fromCharCode(byte);
      return /[A-Za-z0-9_.-]/.test(char) ? char : `%${byte.toString(16).padStart(2, '0')}`;
    })
    .join('');
  return `${base}.${encoded}`;
}

/**
 * Deterministic job id of "advance run `runId` from lease epoch `epoch`": the same run enqueued twice in the
 * same state is one job, in every process. `createdAt` (the run row's) tells two incarnations of a run id
 * apart, so a run deleted and started again under its old id does not collide with its old, kept job.
 * Each `kind` of job has ids of its own, so a job the runtime sent for itself (a wake-up, a recovery)
 * never holds the id under which the user's enqueue or retry of the same epoch would be queued.
 * Returned as a UUID (pg-boss job ids are uuids); BullMQ uses it with a prefix (its custom ids may not
 * contain ':' or be integers).
 *
 * @example
 * jobIdFor('waypoint.report', 'q3-aapl', 0, run.createdAt) // a uuid, the same in every process
 * jobIdFor('waypoint.report', 'q3-aapl', 2, run.createdAt, 'retry') // the retry of the run failed at epoch 2
 */
export function jobIdFor(queue: string, runId: string, epoch: number, createdAt: Date | number, kind: RunJobKind = 'enqueue'): string {
  const born = typeof createdAt === 'number' ? createdAt : createdAt.getTime();
  // An enqueue keeps the id of the releases before kinds, so it still deduplicates against their jobs; every
  // other kind gets an id of its own: a wake-up kept by the queue never takes the id of the user's retry.
  const tag = kind === 'enqueue' ? 'run' : `run:${kind}`;
  return uuidFrom(`${tag}\n${queue}\n${runId}\n${born}\n${epoch}`);
}

/** True for a parent's wake-up (this release's `kind`, or an earlier release's `wake` flag). */
export function isWakeJob(job: RunJob): boolean {
  return job.kind === 'wake' || (job.kind === undefined && job.wake === true);
}

/** True for a job that may run a failed run again: the user's retry (or an earlier release's job that may be one). */
export function retriesFailedRun(job: RunJob): boolean {
  return job.kind === 'retry' || (job.kind === undefined && job.wake !== true);
}

/**
 * Why `job` must not advance `run` (null when it may): the run is finished; or it failed and the job is
 * not a retry sent since that failure (a wake-up or recovery sent while the failing execution still ran,
 * delivered after it); or it failed or waits and another executor has run it since the job was sent
 * (its lease epoch moved on). The worker settles such a job without running anything; the orphan sweep
 * does not count it as stuck.
 *
 * @example
 * const blocker = jobBlocker(await store.getRun(job.runId), job); if (blocker) console.log('skipped:', blocker);
 */
export function jobBlocker(run: RunRecord, job: RunJob): string | null {
  if (run.status === 'completed' || run.status === 'cancelled') return `run is ${run.status}`;
  if ((run.status === 'failed' || run.status === 'waiting') && run.leaseEpoch !== job.epoch) {
    return `run ${run.status}: advanced by another executor since the job was sent (epoch ${job.epoch} -> ${run.leaseEpoch})`;
  }
  if (run.status === 'failed' && !retriesFailedRun(job)) {
    return `run failed, and a ${job.kind ?? 'wake'} job never runs a failed run again (only enqueue of the failed run retries it)`;
  }
  return null;
}

/**
 * Id of the job the orphan sweep sends in place of `jobId`, a delivery stuck with a dead worker: distinct
 * from it (so not deduplicated against the stuck job) and deterministic (many sweepers, one job).
 */
export function redispatchIdFor(jobId: string): string {
  return uuidFrom(`redispatch\n${jobId}`);
}

/**
 * Id of the job that continues `jobId` after a requeue (for queues that requeue by sending a new job):
 * deterministic, so two deliveries of the same job that both requeue it leave one continuation.
 */
export function requeueIdFor(jobId: string): string {
  return uuidFrom(`requeue\n${jobId}`);
}

function uuidFrom(text: string): string {
  const hex = createHash('sha256').update(text).digest('hex');
  // RFC 4122 layout with version 8 (custom) and the variant bits set, so it is a valid uuid to PostgreSQL.
  const variant = ((parseInt(hex[16], 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

/** Checks a Waypoint priority (higher runs first). */
export function checkPriority(priority: unknown, runId: string): number {
  if (priority === undefined) return 0;
  if (typeof priority !== 'number' || !Number.isInteger(priority) || Math.abs(priority) > 1_000_000) {
    throw new WaypointError('INVALID_ARGUMENT', `Priority of run '${runId}' must be an integer in [-1000000, 1000000], got ${JSON.stringify(priority)}.`, { runId });
  }
  return priority;
}

/** Parses and checks a job payload read back from a queue (a foreign or corrupted job fails loudly). */
export function parseRunJob(data: unknown, where: string): RunJob {
  const job = data as Partial<RunJob> | null;
  if (!job || typeof job.runId !== 'string' || typeof job.pipeline !== 'string' || typeof job.epoch !== 'number' || typeof job.enqueuedAt !== 'string') {
    throw new WaypointError('INVALID_JOB', `Job ${where} is not a Waypoint run job (expected { runId, pipeline, epoch, enqueuedAt }); got ${JSON.stringify(data)?.slice(0, 200)}.`);
  }
  const parsed: RunJob = { runId: job.runId, pipeline: job.pipeline, epoch: job.epoch, enqueuedAt: job.enqueuedAt };
  if (typeof job.group === 'string') parsed.group = job.group;
  if (job.wake === true) parsed.wake = true;
  // A kind this release does not know (a newer release's) is read as a delivery the runtime made for itself:
  // it advances an open run and never runs a failed one again.
  if (job.kind !== undefined) parsed.kind = JOB_KINDS.includes(job.kind) ? job.kind : 'recover';
  if (typeof job.redispatchOf === 'string') parsed.redispatchOf = job.redispatchOf;
  return parsed;
}
