import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Class } from '../decorators/options';
import { WaypointError, describeError } from '../contract/errors';
import { faultPoint } from '../core/step/fault-points';
import type { Logger } from '../contract/logger';
import { readPlan } from '../core/plan/plan-reader';
import { itemPipelinesOf } from '../core/flow/fan-out';
import { ShutdownHarness } from '../core/lease/shutdown-harness';
import { TOKENS } from '../contract/tokens';
import type { FleetHost, FleetWorkerHandle, WorkerOptions, WorkerStats } from '../core/run/fleet-port';

export type { SettledEvent, WorkerOptions, WorkerPipeline, WorkerStats } from '../core/run/fleet-port';
import { resolveQueue } from './enqueue';
import { startOrphanSweeper, type OrphanSweeper } from './orphans';
import { advanceDelivery, type Disposition } from './run-dispatch';
import { DEFAULT_QUEUE, isWakeJob, queueNameFor, type Delivery, type RunQueue } from '../contract/run-queue';

interface Lane {
  pipeline: Class;
  name: string;
  queue: string;
  limit: number;
  active: number;
}

/** Default period of a worker's orphan sweep: lease TTL (30 s) + 20 s keeps recovery under 60 s. */
export const DEFAULT_SWEEP_MS = 20_000;

/**
 * A worker process's dispatcher: fetches run jobs of its pipelines from the queue while it has free
 * slots, advances each run with `waypoint.run` under the run lease, and settles the job. Stopping (SIGTERM
 * through the shutdown harness, or `stop()`) stops fetching, pauses the running runs at their next step
 * boundary (the running step gets `gracePeriodMs`), requeues them, and resolves `stopped`.
 *
 * One process must not use its lease owner id (`workerId`) in another process: the lease treats the same
 * owner as the same executor. This worker never runs two deliveries of one run at once itself.
 *
 * @example
 * const worker = await startWorker(waypoint, { pipelines: [Report] }); // a FleetWorker
 * process.on('SIGUSR2', () => void worker.stop('draining for maintenance'));
 * await worker.stopped;
 */
export class FleetWorker implements FleetWorkerHandle {
  /** This worker's id in logs and events (the lease owner id is the Waypoint's `workerId`). */
  readonly id = `${hostname()}:${process.pid}:fleet-${randomBytes(3).toString('hex')}`;
  /** Resolves once the worker has stopped and every run it held is settled. */
  readonly stopped: Promise<void>;
  readonly stats: WorkerStats = { fetched: 0, completed: 0, requeued: 0, failed: 0 };

  private readonly lanes: Lane[];
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private readonly lockedRetryMaxMs: number;
  private readonly logger: Logger;
  private readonly active = new Map<string, { controller: AbortController; group?: string }>();
  private readonly groups = new Map<string, number>();
  private readonly tasks = new Set<Promise<void>>();
  private readonly harness: ShutdownHarness;
  private sweeper: OrphanSweeper | undefined;
  private stopping = false;
  private stopReason = 'stop requested';
  private stopPromise: Promise<void> | undefined;
  private loopPromise: Promise<void> = Promise.resolve();
  private wakeUp: (() => void) | undefined;
  private resolveStopped!: () => void;

  constructor(
    private readonly waypoint: FleetHost,
    private readonly queue: RunQueue,
    private readonly options: WorkerOptions,
  ) {
    this.concurrency = positiveInt('concurrency', options.concurrency ?? 4);
    this.pollIntervalMs = positiveInt('pollIntervalMs', options.pollIntervalMs ?? 500);
    this.lockedRetryMaxMs = positiveInt('lockedRetryMaxMs', options.lockedRetryMaxMs ?? 30_000);
    if (options.groupConcurrency !== undefined) positiveInt('groupConcurrency', options.groupConcurrency);
    if (!Array.isArray(options.pipelines) || options.pipelines.length === 0) {
      throw new WaypointError('INVALID_ARGUMENT', 'startWorker needs at least one pipeline: startWorker(waypoint, { pipelines: [MyPipeline] }).');
    }
    const base = options.queueName ?? DEFAULT_QUEUE;
    this.lanes = options.pipelines.flatMap((entry) => {
      const { pipeline, concurrency } = typeof entry === 'function' ? { pipeline: entry, concurrency: undefined } : entry;
      const plan = readPlan(pipeline);
      waypoint.register(pipeline);
      const limit = positiveInt(`concurrency of ${plan.name}`, concurrency ?? this.concurrency);
      // A worker of a pipeline also takes the items its distributed forEach bodies queue (hidden pipelines).
      return [pipeline, ...itemPipelinesOf(plan)].map((type) => {
        const name = readPlan(type).name;
        return { pipeline: type, name, queue: queueNameFor(base, name), limit, active: 0 };
      });
    });
    this.lanes = this.lanes.filter((lane, i) => this.lanes.findIndex((other) => other.name === lane.name) === i);
    this.logger = waypoint.container.get(TOKENS.Logger);
    this.stopped = new Promise((resolve) => (this.resolveStopped = resolve));
    this.harness = new ShutdownHarness(this.logger, { signals: options.signals ?? ['SIGTERM', 'SIGINT'] });
    this.harness.signal.addEventListener('abort', () => void this.stop(`${this.harness.received ?? 'signal'} received`), { once: true });
  }

  /** Starts fetching (after the queue is reachable) and the orphan sweep. Called by `startWorker`. */
  async begin(): Promise<this> {
    await this.queue.start();
    this.harness.install();
    const sweep = this.options.recoverOrphans ?? {};
    if (sweep !== false) {
      this.sweeper = startOrphanSweeper(this.waypoint, {
        everyMs: sweep.everyMs ?? DEFAULT_SWEEP_MS,
        olderThanMs: sweep.olderThanMs ?? 0,
        stuckAfterMs: sweep.stuckAfterMs,
        mode: 'enqueue',
        queue: this.queue,
        queueName: this.options.queueName,
        pipelines: this.lanes.map((lane) => lane.name),
        // Fetch what the sweep just queued now rather than after the poll interval.
        onSweep: () => this.wakeUp?.(),
      });
    }
    this.loopPromise = this.loop().catch((error: unknown) => {
      // A bug, not an outage (fetch errors are handled in the loop): stop cleanly rather than fetch no more in silence.
      this.logger.error('fleet worker dispatch loop failed; stopping the worker', { workerId: this.id, error: describeError(error) });
      void this.stop('dispatch loop failed');
    });
    this.logger.info('fleet worker started', { workerId: this.id, queues: this.lanes.map((l) => l.queue), concurrency: this.concurrency });
    return this;
  }

  /** Run ids executing in this worker now. */
  running(): string[] {
    return [...this.active.keys()];
  }

  /**
   * Stops gracefully: no new fetches; running runs pause at their next step boundary and are requeued
   * for another worker. Resolves when everything is settled (the same promise as `stopped`).
   */
  stop(reason = 'stop requested'): Promise<void> {
    this.stopPromise ??= (async () => {
      this.stopping = true;
      this.stopReason = reason;
      this.logger.info('fleet worker stopping: pausing running runs at their next step boundary', { workerId: this.id, reason, running: this.running() });
      for (const { controller } of this.active.values()) controller.abort(`worker stopping (${reason})`);
      this.wakeUp?.();
      await this.loopPromise;
      while (this.tasks.size > 0) await Promise.allSettled([...this.tasks]);
      await this.sweeper?.stop();
      this.harness.dispose();
      this.logger.info('fleet worker stopped', { workerId: this.id, ...this.stats });
      this.resolveStopped();
    })();
    return this.stopPromise;
  }

  private async loop(): Promise<void> {
    for (let turn = 0; !this.stopping; turn++) {
      // Deliveries started this turn: deferred ones (group limit, duplicate) do not count, so a backlog
      // of deferrable jobs makes the loop idle instead of spinning.
      let fetched = 0;
      // Rotate the starting lane so one busy pipeline cannot starve the others of free slots.
      for (let i = 0; i < this.lanes.length && !this.stopping; i++) {
        const lane = this.lanes[(turn + i) % this.lanes.length];
        const free = Math.min(this.concurrency - this.active.size, lane.limit - lane.active);
        if (free <= 0) continue;
        let deliveries: Delivery[];
        try {
          deliveries = await this.queue.fetch(lane.queue, free);
        } catch (error) {
          this.logger.warn('fetching run jobs failed; trying again after the poll interval', { workerId: this.id, queue: lane.queue, error: describeError(error) });
          continue;
        }
        this.stats.fetched += deliveries.length;
        for (const delivery of deliveries) if (this.dispatch(lane, delivery)) fetched++;
      }
      if (fetched === 0 || this.active.size >= this.concurrency) await this.idle();
    }
  }

  /** Waits for the poll interval, or less when a slot frees up or the worker stops. */
  private idle(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, this.pollIntervalMs);
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = done;
    });
  }

  /** Starts the delivery's run, or defers it; true when it started (the loop paces itself on that). */
  private dispatch(lane: Lane, delivery: Delivery): boolean {
    const { runId, group } = delivery.job;
    let task: Promise<void>;
    let started = false;
    if (this.active.has(runId)) {
      // Same lease owner, same process: the lease cannot tell two local executions apart, so this must.
      // The local execution settles its own job; this one is only a backstop should this process die.
      // A fan-out parent's wake-up meets the parent's own execution ending here: back within a second, not after the lease.
      const delayMs = isWakeJob(delivery.job) ? Math.min(this.lockedRetryMaxMs, Math.max(this.pollIntervalMs, 1_000)) : this.lockedRetryMaxMs;
      task = this.settle(lane, delivery, { kind: 'requeue', delayMs, reason: 'run is already executing in this worker' });
    } else if (group !== undefined && this.options.groupConcurrency !== undefined && (this.groups.get(group) ?? 0) >= this.options.groupConcurrency) {
      task = this.settle(lane, delivery, { kind: 'requeue', delayMs: Math.max(1_000, this.pollIntervalMs), reason: `group '${group}' is at its limit in this worker` });
    } else {
      task = this.execute(lane, delivery);
      started = true;
    }
    this.tasks.add(task);
    void task.finally(() => this.tasks.delete(task));
    return started;
  }

  private async execute(lane: Lane, delivery: Delivery): Promise<void> {
    const { runId, group } = delivery.job;
    const controller = new AbortController();
    if (this.stopping) controller.abort(`worker stopping (${this.stopReason})`);
    this.active.set(runId, { controller, group });
    lane.active++;
    if (group !== undefined) this.groups.set(group, (this.groups.get(group) ?? 0) + 1);
    try {
      faultPoint('after-dequeue-before-lease');
      const disposition = await advanceDelivery(
        {
          waypoint: this.waypoint,
          pipeline: lane.pipeline,
          signal: controller.signal,
          gracePeriodMs: this.options.gracePeriodMs ?? 10_000,
          lockedRetry: { minMs: this.pollIntervalMs, maxMs: this.lockedRetryMaxMs },
          logger: this.logger,
          fleet: { queue: this.queue, queueName: this.options.queueName ?? DEFAULT_QUEUE },
        },
        delivery,
      );
      if (disposition.kind === 'complete') faultPoint('after-last-step-before-ack');
      await this.settle(lane, delivery, disposition);
    } finally {
      this.active.delete(runId);
      lane.active--;
      if (group !== undefined) {
        const left = (this.groups.get(group) ?? 1) - 1;
        if (left > 0) this.groups.set(group, left);
        else this.groups.delete(group);
      }
      this.wakeUp?.();
    }
  }

  private async settle(lane: Lane, delivery: Delivery, disposition: Disposition): Promise<void> {
    let detail: Record<string, unknown>;
    try {
      if (disposition.kind === 'complete') {
        detail = disposition.output;
        await this.queue.complete(delivery, disposition.output);
        this.stats.completed++;
      } else if (disposition.kind === 'requeue') {
        detail = { reason: disposition.reason, delayMs: disposition.delayMs };
        await this.queue.requeue(delivery, disposition.delayMs, disposition.reason);
        this.stats.requeued++;
      } else {
        detail = { error: disposition.error.message };
        await this.queue.fail(delivery, disposition.error);
        this.stats.failed++;
      }
    } catch (error) {
      // The job stays with this delivery until the queue expires it and hands it out again: slower, not lost.
      this.logger.error('could not settle a run job; the queue will hand it out again after its expiry', {
        workerId: this.id,
        runId: delivery.job.runId,
        jobId: delivery.id,
        disposition: disposition.kind,
        error: describeError(error),
      });
      return;
    }
    try {
      this.options.onSettled?.({ workerId: this.id, runId: delivery.job.runId, pipeline: lane.name, jobId: delivery.id, disposition: disposition.kind, detail });
    } catch (error) {
      this.logger.warn('onSettled callback threw', { workerId: this.id, error: describeError(error) });
    }
  }
}

/**
 * Starts a fleet worker in this process: it takes runs of `pipelines` from the queue and advances them,
 * up to `concurrency` at once (and each pipeline's own limit). Start as many worker processes as you like,
 * on as many hosts: the run lease and its fencing keep every run on one executor at a time.
 *
 * @example
 * const worker = await startWorker(waypoint, { pipelines: [{ pipeline: FinancialAnalysis, concurrency: 2 }, Digest], concurrency: 4 });
 * await worker.stopped;              // SIGTERM: runs pause at a step boundary and go back to the queue
 * await closeQueue(waypoint); await waypoint.close();
 */
export async function startWorker(waypoint: FleetHost, options: WorkerOptions): Promise<FleetWorker> {
  const queue = resolveQueue(waypoint, options?.queue, 'startWorker()');
  return new FleetWorker(waypoint, queue, options).begin();
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value <= 0) throw new WaypointError('INVALID_ARGUMENT', `startWorker: ${name} must be a positive integer, got ${JSON.stringify(value)}.`);
  return value;
}
