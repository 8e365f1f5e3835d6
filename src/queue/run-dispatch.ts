import type { Class } from '../decorators/options';
import { RunLockedError, WaypointError, describeError } from '../contract/errors';
import { holderIsDead } from '../core/lease/run-lease';
import { TOKENS } from '../contract/tokens';
import type { Logger } from '../contract/logger';
import type { FleetHost } from '../core/run/fleet-port';
import { isWakeJob, jobBlocker, jobIdFor, retriesFailedRun, queueNameFor, type Delivery, type RunJob, type RunQueue } from '../contract/run-queue';
import type { RunRecord } from '../contract/checkpoint-store';
import { childEnded, fanOutOf } from '../core/flow/fan-out';
import { faultPoint } from '../core/step/fault-points';

/** How a delivery is settled once its run has been advanced (or found not to need it). */
export type Disposition = { kind: 'complete'; output: Record<string, unknown> } | { kind: 'requeue'; delayMs: number; reason: string } | { kind: 'fail'; error: Error };

/** What {@link advanceDelivery} needs from the worker. */
export interface AdvanceContext {
  waypoint: FleetHost;
  pipeline: Class;
  /** Aborted when the worker stops: the run pauses at its next step boundary and the job is requeued. */
  signal: AbortSignal;
  gracePeriodMs: number;
  /** Bounds of the wait before a locked run's job is tried again. */
  lockedRetry: { minMs: number; maxMs: number };
  logger: Logger;
  /**
   * The fleet's queue and base queue name: a run advanced here queues its forEach's child runs on it, and
   * a child run that ends here wakes its parent. Without it, child runs run in the parent's process.
   */
  fleet?: { queue: RunQueue; queueName: string };
}

/**
 * Advances the run a delivery names, under the run lease, and says how to settle the delivery:
 *
 * - completed or cancelled run, a `failed` / `waiting` run that another executor has touched since the
 *   job was sent (its lease epoch moved on), or a failed run and a job that is not the user's retry (a
 *   wake-up or recovery sent while the failing execution still ran): nothing to do, complete the job
 *   without running anything or taking the lease (see `jobBlocker`);
 * - otherwise `waypoint.run` resumes it; the job completes with the outcome (a run that ends `failed`
 *   completes its job too: the run record holds the error, a step's retries are the run's business);
 * - another live executor holds the lease (`RUN_LOCKED`): requeue for when that lease would expire;
 * - the worker is stopping and the run paused at a step boundary: requeue at once;
 * - anything that left the run un-advanced (store or queue down, a version without migration): fail the
 *   job, so the queue retries it after its retry delay.
 *
 * @example
 * const disposition = await advanceDelivery({ waypoint, pipeline, signal, gracePeriodMs: 10_000, lockedRetry: { minMs: 500, maxMs: 30_000 }, logger }, delivery);
 */
export async function advanceDelivery(ctx: AdvanceContext, delivery: Delivery): Promise<Disposition> {
  const { runId, epoch } = delivery.job;
  const fields = { runId, queue: delivery.queue, jobId: delivery.id };
  let run;
  try {
    run = await ctx.waypoint.store.getRun(runId);
  } catch (error) {
    return { kind: 'fail', error: asError(error) };
  }
  if (!run) {
    ctx.logger.warn('job names a run the store does not have (deleted or pruned); dropping the job', fields);
    return complete('skipped', { reason: 'run not found' });
  }
  if (run.pipelineName !== delivery.job.pipeline) {
    ctx.logger.error('job names a run of another pipeline; dropping the job', { ...fields, stored: run.pipelineName, job: delivery.job.pipeline });
    return complete('skipped', { reason: `run belongs to pipeline '${run.pipelineName}'` });
  }
  const blocker = jobBlocker(run, delivery.job);
  if (blocker !== null) {
    // A redelivered job of a child that ended before its worker died may be all that is left to wake the parent.
    if (run.status !== 'waiting') await wakeParent(ctx, run);
    if (run.status === 'failed' && run.leaseEpoch === epoch)
      ctx.logger.info('job does not retry a failed run; settled without running it', { ...fields, kind: delivery.job.kind ?? 'wake' });
    return complete('skipped', { status: run.status, kind: delivery.job.kind ?? null, reason: blocker });
  }
  if (ctx.signal.aborted) return { kind: 'requeue', delayMs: 0, reason: 'worker stopping before the run started' };
  // Held by a live executor: the check above saw it open, but that execution may end failed the moment before
  // this one would take the lease, and a failed run must not be run by a job that only the check let through.
  if (heldByLiveExecutor(run, ownerOf(ctx.waypoint))) return afterError(ctx, delivery, new RunLockedError(runId, run.leaseOwner, run.leaseExpiresAt));

  try {
    // Checked again under the lease: a run that fails between the look above and the lease is not run by a job that may not retry it.
    const retryFailed = retriesFailedRun(delivery.job);
    const result = await ctx.waypoint.run(ctx.pipeline, { runId, signal: ctx.signal, gracePeriodMs: ctx.gracePeriodMs, waitForLockMs: 0, fleet: ctx.fleet, retryFailed });
    if (result.status === 'paused' && ctx.signal.aborted) {
      return { kind: 'requeue', delayMs: 0, reason: `paused at sequence ${result.lastSequence} because the worker is stopping` };
    }
    if (result.status === 'completed') await wakeParent(ctx, run, true);
    return complete('advanced', { status: result.status, stepsExecuted: result.stepsExecuted, stepsSkipped: result.stepsSkipped, lastSequence: result.lastSequence });
  } catch (error) {
    return afterError(ctx, delivery, error);
  }
}

async function afterError(ctx: AdvanceContext, delivery: Delivery, error: unknown): Promise<Disposition> {
  const runId = delivery.job.runId;
  const code = error instanceof WaypointError ? error.code : null;
  if (code === 'RUN_LOCKED') {
    const expiresAt = (error as RunLockedError).expiresAt;
    // Come back when the holder's lease would have expired: a live holder has renewed it by then, a dead
    // one has lost it and this job takes the run over.
    const untilExpiry = expiresAt ? expiresAt.getTime() - Date.now() + 50 : 0;
    let delayMs = Math.min(ctx.lockedRetry.maxMs, Math.max(ctx.lockedRetry.minMs, untilExpiry));
    // A parent's wake-up that met the parent's own execution ending: that lease is released in a moment.
    if (isWakeJob(delivery.job)) delayMs = Math.min(delayMs, Math.max(ctx.lockedRetry.minMs, 1_000));
    return { kind: 'requeue', delayMs, reason: `run locked by ${(error as RunLockedError).owner ?? 'another executor'}` };
  }
  if (code === 'RUN_CANCELLED') {
    await wakeParent(ctx, await ctx.waypoint.store.getRun(runId).catch(() => null));
    return complete('skipped', { status: 'cancelled' });
  }
  if (code === 'RUN_NOT_RETRIED') {
    await wakeParent(ctx, await ctx.waypoint.store.getRun(runId).catch(() => null));
    ctx.logger.info('job does not retry a failed run; settled without running it', { runId, jobId: delivery.id, kind: delivery.job.kind ?? 'wake' });
    return complete('skipped', { status: 'failed', kind: delivery.job.kind ?? null, reason: 'run failed before the lease was taken; only a retry runs it again' });
  }
  if (code === 'LEASE_LOST') {
    // Our lease expired and another executor (with its own delivery) took the run over; it carries on.
    ctx.logger.warn('lease lost while advancing a run; its new executor carries on', { runId, jobId: delivery.id });
    return complete('lease-lost', {});
  }
  let after = null;
  try {
    after = await ctx.waypoint.store.getRun(runId);
  } catch {
    // The store is down: the job is retried later, when the run's state can be known.
  }
  if (after?.status === 'failed') {
    await wakeParent(ctx, after, true);
    return complete('advanced', { status: 'failed', error: JSON.parse(describeError(error)) as unknown });
  }
  ctx.logger.warn('run was not advanced; the queue will retry its job', { runId, jobId: delivery.id, error: describeError(error) });
  return { kind: 'fail', error: asError(error) };
}

const OPEN: RunRecord['status'][] = ['running', 'paused', 'waiting'];

/**
 * After a child run of a distributed forEach has ended here: queues its parent again when the parent has
 * something to do (every sibling ended, an item left to start under `concurrency`, or a failure to fail
 * on). The job id comes from the parent's lease epoch, so workers ending the last two children at once
 * send one job. Errors are logged: the orphan sweep wakes a parent that was missed.
 */
export async function wakeParent(ctx: Pick<AdvanceContext, 'waypoint' | 'fleet' | 'logger'>, child: RunRecord | null, endedHere = false): Promise<boolean> {
  if (!ctx.fleet || !child?.parentRunId) return false;
  const meta = fanOutOf(child);
  if (!meta) return false; // a child run in its parent's process: the parent is running it
  try {
    const store = ctx.waypoint.store;
    const now = (await store.getRun(child.runId)) ?? child;
    if (!childEnded(now)) return false;
    const parentRunId = child.parentRunId;
    const bounded = meta.concurrency < meta.items;
    const mine = (runs: RunRecord[]) => runs.filter((run) => fanOutOf(run)?.at === meta.at);
    let open = await store.listRuns({ parentRunId, status: OPEN, limit: bounded ? meta.concurrency : 1 });
    // Another fan-out of the same parent has open children too: count this one's exactly.
    if (open.some((run) => fanOutOf(run)?.at !== meta.at)) open = await store.listRuns({ parentRunId, status: OPEN });
    const openMine = mine(open).length;
    let due = openMine === 0 || (meta.onItemError === 'fail' && now.status !== 'completed');
    if (!due && bounded && openMine < meta.concurrency) due = mine(await store.listRuns({ parentRunId })).length < meta.items;
    if (!due) return false;
    const parent = await store.getRun(parentRunId);
    if (!parent || parent.status === 'completed' || parent.status === 'cancelled' || parent.status === 'failed') return false;
    if (openMine === 0 && endedHere) faultPoint('after-last-child-before-parent-wake');
    return await sendWake(ctx.fleet, parent);
  } catch (error) {
    ctx.logger.warn("could not queue a child run's parent again; the orphan sweep will", { runId: child.runId, parentRunId: child.parentRunId, error: describeError(error) });
    return false;
  }
}

/**
 * Queues a waiting fan-out parent again (one job per lease epoch of the parent, from any number of senders).
 * Its id is a wake-up's, never the user's enqueue's: a wake-up sent while the parent's execution was failing
 * is settled unrun after the failure (`jobBlocker`), and kept by the queue it must not refuse the user's retry.
 */
export async function sendWake(fleet: { queue: RunQueue; queueName: string }, parent: RunRecord): Promise<boolean> {
  const name = queueNameFor(fleet.queueName, parent.pipelineName);
  const job: RunJob = { runId: parent.runId, pipeline: parent.pipelineName, epoch: parent.leaseEpoch, enqueuedAt: new Date().toISOString(), kind: 'wake', wake: true };
  return fleet.queue.send(name, job, { id: jobIdFor(name, parent.runId, parent.leaseEpoch, parent.createdAt, 'wake') });
}

/** True while another executor holds the run's lease and may still end it (its lease unexpired, its process not known dead). */
function heldByLiveExecutor(run: RunRecord, self: string | null): boolean {
  // Our own owner id: a restarted process with a stable worker id re-takes its lease at once (the run driver's rule).
  if (run.status !== 'running' || run.leaseOwner === null || run.leaseExpiresAt === null || run.leaseOwner === self) return false;
  return run.leaseExpiresAt.getTime() > Date.now() && !holderIsDead(run.leaseOwner);
}

function ownerOf(waypoint: FleetHost): string | null {
  return waypoint.container.isBound(TOKENS.Options) ? (waypoint.container.get(TOKENS.Options).workerId ?? null) : null;
}

function complete(outcome: string, fields: Record<string, unknown>): Disposition {
  return { kind: 'complete', output: { outcome, ...fields } };
}

function asError(error: unknown): Error {
  // plain Error: a thrown non-Error made an Error, to be logged and settled; not shown as a message of ours.
  return error instanceof Error ? error : new Error(String(error));
}
