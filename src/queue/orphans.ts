import { WaypointError, describeError } from '../contract/errors';
import { TOKENS } from '../contract/tokens';
import { holderIsDead } from '../core/lease/run-lease';
import { FAN_OUT_MARK, FAN_OUT_REDRIVE_MARK, fanOutOf, parentWakeDue, type FanOutMeta } from '../core/flow/fan-out';
import { sendWake } from './run-dispatch';
import type { FleetHost } from '../core/run/fleet-port';
import type { RunRecord, RunStatus } from '../contract/checkpoint-store';
import { DEFAULT_QUEUE, RUN_QUEUE, jobBlocker, jobIdFor, queueNameFor, redispatchIdFor, type ActiveJob, type RunJob, type RunQueue } from '../contract/run-queue';

/** Options of {@link recoverOrphans}. */
export interface RecoverOrphansOptions {
  /** Only runs whose lease expired at least this long ago (margin for clock skew between hosts). Default 0. */
  olderThanMs?: number;
  /**
   * 'enqueue': send each orphan to the fleet's queue (deduplicated: many sweepers, one job per orphan).
   * 'resume': resume each orphan in this process (`waypoint.resume`, so its pipeline must be registered).
   * Default: 'enqueue' when a queue is given or bound, else 'resume'.
   */
  mode?: 'enqueue' | 'resume';
  queue?: RunQueue;
  /** Base queue name, as given to the workers. Default 'waypoint'. */
  queueName?: string;
  /** Only this pipeline's runs. */
  pipelineName?: string;
  /** At most this many running runs are examined per sweep. Default 1000. */
  limit?: number;
  /** In 'resume' mode, orphans resumed at once. Default 1. */
  concurrency?: number;
  /**
   * Enqueue mode: pipelines whose queues are also checked for deliveries stuck with a dead worker (a job
   * handed out `stuckAfterMs` ago or more whose run nobody holds a live lease on: the worker died between
   * dequeue and lease, or after pausing the run and before requeueing the job). Such a run is re-dispatched
   * under a new job id. Default: `[pipelineName]` when given, else none. Fleet workers pass their own.
   */
  pipelines?: string[];
  /**
   * How long a job must have been handed out before its unleased run counts as stuck. A live worker leases
   * the run within milliseconds of the dequeue; this only has to stay well above that and above clock skew
   * between hosts. Default 30000 (the default lease TTL).
   */
  stuckAfterMs?: number;
}

/** What a sweep did with one orphan. */
export interface OrphanAction {
  runId: string;
  pipeline: string;
  /**
   * enqueued / already-queued (enqueue mode), resumed / locked / failed (resume mode, or a failed send),
   * redispatched (a delivery stuck with a dead worker got a new job; the stuck one is `stuckJobId`),
   * woken (a parent waiting for its fleet children, whose children are due, was queued again).
   */
  action: 'enqueued' | 'already-queued' | 'resumed' | 'locked' | 'failed' | 'redispatched' | 'woken';
  /** The stuck delivery's job id, for `redispatched` (and a `failed` redispatch). */
  stuckJobId?: string;
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  /** Status after a resume. */
  status?: RunStatus;
  error?: string;
}

/** A `running` run that was never leased gets this long before it counts as orphaned (its creator may be about to lease it). */
export const UNLEASED_GRACE_MS = 5_000;

/** Default of `RecoverOrphansOptions.stuckAfterMs`. */
export const STUCK_DELIVERY_MS = 30_000;

/**
 * Finds runs in `running` whose executor is gone (lease expired, or its holder is a dead process on this
 * host) and resumes or re-enqueues them. Works without a queue: in 'resume' mode any process that has the
 * pipelines registered can run it (from cron, on start-up). A run that is merely `paused` or `waiting`
 * is not an orphan: it stopped on purpose, unless a queue job that should advance it is stuck with a dead
 * worker: in enqueue mode, with `pipelines`, the sweep also asks the queue for such deliveries (see
 * `RecoverOrphansOptions.pipelines`) and re-dispatches their runs. The run row and its lease are the
 * truth, not the queue job: a stuck job that the queue hands out later finds its run done or leased.
 *
 * @example
 * const actions = await recoverOrphans(waypoint, { olderThanMs: 5_000 });
 * for (const a of actions) console.log(a.runId, a.action, a.status);
 */
export async function recoverOrphans(waypoint: FleetHost, options: RecoverOrphansOptions = {}): Promise<OrphanAction[]> {
  const olderThanMs = options.olderThanMs ?? 0;
  if (!(Number.isFinite(olderThanMs) && olderThanMs >= 0)) {
    throw new WaypointError('INVALID_ARGUMENT', `recoverOrphans: olderThanMs must be a non-negative number, got ${JSON.stringify(options.olderThanMs)}.`);
  }
  const queue = options.queue ?? (waypoint.container.isBound(RUN_QUEUE) ? waypoint.container.get(RUN_QUEUE) : undefined);
  const mode = options.mode ?? (queue ? 'enqueue' : 'resume');
  if (mode === 'enqueue' && !queue) {
    throw new WaypointError('QUEUE_NOT_CONFIGURED', "recoverOrphans({ mode: 'enqueue' }) needs a run queue: pass { queue } or bind pgBossQueue / bullmqQueue.");
  }
  const stuckAfterMs = options.stuckAfterMs ?? STUCK_DELIVERY_MS;
  if (!(Number.isFinite(stuckAfterMs) && stuckAfterMs >= 0)) {
    throw new WaypointError('INVALID_ARGUMENT', `recoverOrphans: stuckAfterMs must be a non-negative number, got ${JSON.stringify(options.stuckAfterMs)}.`);
  }
  const limit = options.limit ?? 1000;
  const base = options.queueName ?? DEFAULT_QUEUE;
  const running = await waypoint.store.listRuns({ status: 'running', pipelineName: options.pipelineName, limit });
  const now = Date.now();
  const orphans = running.filter((run) => isOrphan(run, now, olderThanMs));
  const logger = waypoint.container.get(TOKENS.Logger);
  let actions: OrphanAction[] = [];
  if (orphans.length > 0) {
    logger.warn('orphaned runs found', { count: orphans.length, mode, runIds: orphans.slice(0, 20).map((r) => r.runId) });
    if (mode === 'enqueue') actions = await Promise.all(orphans.map((run) => reenqueue(queue!, base, run)));
    else actions = await resumeAll(waypoint, orphans, Math.max(1, options.concurrency ?? 1));
  }
  if (mode === 'enqueue') actions.push(...(await wakeFanOutParents(waypoint, queue!, base, options.pipelineName, limit)));
  const pipelines = options.pipelines ?? (options.pipelineName !== undefined ? [options.pipelineName] : []);
  if (mode === 'enqueue' && pipelines.length > 0) {
    // A run just given a fresh job above needs no second one.
    const handled = new Set(actions.filter((a) => a.action === 'enqueued').map((a) => a.runId));
    for (const pipeline of new Set(pipelines)) {
      actions.push(...(await redispatchStuck(waypoint, queue!, queueNameFor(base, pipeline), stuckAfterMs, limit, handled)));
    }
  }
  return actions;
}

/**
 * True when a delivery of `job` that has been active for long leaves its run with nobody to advance it:
 * the run still needs the job (`jobBlocker` finds nothing against it: not finished, not advanced past the
 * job's epoch if failed or waiting, not failed unless the job is a retry) and
 * no live executor holds its lease.
 */
export function isStuckDelivery(run: RunRecord | null, job: RunJob, now: number): run is RunRecord {
  if (!run || run.pipelineName !== job.pipeline) return false;
  // A job its worker would settle without running anything (see jobBlocker) leaves nothing undone.
  if (jobBlocker(run, job) !== null) return false;
  const leased = run.leaseOwner !== null && run.leaseExpiresAt !== null && run.leaseExpiresAt.getTime() > now && !holderIsDead(run.leaseOwner);
  return !leased;
}

async function redispatchStuck(waypoint: FleetHost, queue: RunQueue, name: string, stuckAfterMs: number, limit: number, handled: Set<string>): Promise<OrphanAction[]> {
  const stuck: ActiveJob[] = await queue.activeJobs(name, stuckAfterMs, limit);
  const actions: OrphanAction[] = [];
  for (const active of stuck) {
    const runId = active.job.runId;
    if (handled.has(runId)) continue;
    const run = await waypoint.store.getRun(runId);
    if (!isStuckDelivery(run, active.job, Date.now())) continue;
    handled.add(runId);
    const action = { runId, pipeline: run.pipelineName, leaseOwner: run.leaseOwner, leaseExpiresAt: run.leaseExpiresAt, stuckJobId: active.id };
    waypoint.container.get(TOKENS.Logger).warn('a run job is held by a worker that is gone (the run is not leased); re-dispatching the run', {
      runId,
      queue: name,
      jobId: active.id,
      activeForMs: active.activeForMs,
      status: run.status,
    });
    try {
      // Same job payload (its epoch still says which failed/waiting state it may advance) and priority, new id: the
      // stuck job stays with the queue and, handed out again later, finds the run leased or finished.
      // The copy stands in for the stuck job, so it keeps its kind: a stuck retry still retries, a stuck wake-up
      // still never runs a failed parent.
      const copy: RunJob = { ...active.job, enqueuedAt: new Date().toISOString(), redispatchOf: active.id };
      const sent = await queue.send(name, copy, { id: redispatchIdFor(active.id), priority: active.priority });
      actions.push({ ...action, action: sent ? 'redispatched' : 'already-queued' });
    } catch (error) {
      actions.push({ ...action, action: 'failed', error: error instanceof Error ? error.message : String(error) });
    }
  }
  return actions;
}

/**
 * Parents waiting for their fleet children (a distributed forEach) whose children are due (see
 * `parentWakeDue`) are queued again: the safety net for a worker that died after ending the last child
 * but before waking the parent. The job id is the one the child's worker would have used, so a parent
 * already woken gets no second job.
 */
async function wakeFanOutParents(waypoint: FleetHost, queue: RunQueue, base: string, pipelineName: string | undefined, limit: number): Promise<OrphanAction[]> {
  const waiting = (await waypoint.store.listRuns({ status: 'waiting', pipelineName, limit })).filter((run) => run.resumeHint?.includes(FAN_OUT_MARK));
  const actions: OrphanAction[] = [];
  for (const parent of waiting) {
    const children = await waypoint.store.listRuns({ parentRunId: parent.runId });
    const fanOuts = new Map<string, FanOutMeta>();
    for (const child of children) {
      const meta = fanOutOf(child);
      if (meta) fanOuts.set(meta.at, meta);
    }
    // A parent the queue failed while it queued its children is re-driven whatever they say: some have no job.
    const redrive = parent.resumeHint?.includes(FAN_OUT_REDRIVE_MARK) ?? false;
    if (!redrive && ![...fanOuts.values()].some((meta) => parentWakeDue(meta, children))) continue;
    const action = { runId: parent.runId, pipeline: parent.pipelineName, leaseOwner: parent.leaseOwner, leaseExpiresAt: parent.leaseExpiresAt };
    try {
      const sent = await sendWake({ queue, queueName: base }, parent);
      if (sent) waypoint.container.get(TOKENS.Logger).warn('a parent waiting for its fleet children had not been woken; queued it again', { runId: parent.runId });
      actions.push({ ...action, action: sent ? 'woken' : 'already-queued' });
    } catch (error) {
      actions.push({ ...action, action: 'failed', error: error instanceof Error ? error.message : String(error) });
    }
  }
  return actions;
}

/** True when the run's executor is gone: its lease expired `olderThanMs` ago, or its holder is a dead local process. */
export function isOrphan(run: RunRecord, now: number, olderThanMs: number): boolean {
  if (run.status !== 'running') return false;
  if (run.leaseOwner && holderIsDead(run.leaseOwner)) return true;
  const expiry = run.leaseExpiresAt ? run.leaseExpiresAt.getTime() : run.updatedAt.getTime() + UNLEASED_GRACE_MS;
  return expiry <= now - olderThanMs;
}

/** A periodic orphan sweep; `stop()` waits for a sweep in progress. */
export interface OrphanSweeper {
  stop(): Promise<void>;
}

/**
 * Runs {@link recoverOrphans} every `everyMs` (never two sweeps at once) until stopped. Errors are logged,
 * not thrown: the next sweep tries again. The timer does not keep the process alive.
 *
 * @example
 * const sweeper = startOrphanSweeper(waypoint, { everyMs: 30_000, olderThanMs: 5_000 });
 * // on shutdown
 * await sweeper.stop();
 */
export function startOrphanSweeper(waypoint: FleetHost, options: RecoverOrphansOptions & { everyMs: number; onSweep?: (actions: OrphanAction[]) => void }): OrphanSweeper {
  if (!(Number.isFinite(options.everyMs) && options.everyMs > 0)) {
    throw new WaypointError('INVALID_ARGUMENT', `startOrphanSweeper: everyMs must be a positive number, got ${JSON.stringify(options.everyMs)}.`);
  }
  const logger = waypoint.container.get(TOKENS.Logger);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> = Promise.resolve();
  const tick = () => {
    sweeping = (async () => {
      try {
        const actions = await recoverOrphans(waypoint, options);
        if (actions.length > 0) options.onSweep?.(actions);
      } catch (error) {
        logger.warn('orphan sweep failed; trying again on the next period', { error: describeError(error) });
      }
      if (!stopped) schedule();
    })();
  };
  const schedule = () => {
    timer = setTimeout(tick, options.everyMs);
    timer.unref();
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await sweeping;
    },
  };
}

async function reenqueue(queue: RunQueue, base: string, run: RunRecord): Promise<OrphanAction> {
  const action = { runId: run.runId, pipeline: run.pipelineName, leaseOwner: run.leaseOwner, leaseExpiresAt: run.leaseExpiresAt };
  try {
    const name = queueNameFor(base, run.pipelineName);
    // A recovery, not the user's request: should the run fail before it is delivered (a slow executor that was
    // not dead after all), the job settles without running it again.
    const job: RunJob = { runId: run.runId, pipeline: run.pipelineName, epoch: run.leaseEpoch, enqueuedAt: new Date().toISOString(), kind: 'recover' };
    const sent = await queue.send(name, job, { id: jobIdFor(name, run.runId, run.leaseEpoch, run.createdAt, 'recover') });
    return { ...action, action: sent ? 'enqueued' : 'already-queued' };
  } catch (error) {
    return { ...action, action: 'failed', error: error instanceof Error ? error.message : String(error) };
  }
}

async function resumeAll(waypoint: FleetHost, orphans: RunRecord[], concurrency: number): Promise<OrphanAction[]> {
  const results = new Array<OrphanAction>(orphans.length);
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < orphans.length; i = next++) {
      const run = orphans[i];
      const action = { runId: run.runId, pipeline: run.pipelineName, leaseOwner: run.leaseOwner, leaseExpiresAt: run.leaseExpiresAt };
      try {
        const result = await waypoint.resume(run.runId, { waitForLockMs: 0 });
        results[i] = { ...action, action: 'resumed', status: result.status };
      } catch (error) {
        const code = error instanceof WaypointError ? error.code : null;
        const message = error instanceof Error ? error.message : String(error);
        // Another sweeper or worker got there first: that is the point, not a failure.
        results[i] = code === 'RUN_LOCKED' ? { ...action, action: 'locked' } : { ...action, action: 'failed', error: message };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, orphans.length) }, lane));
  return results;
}
