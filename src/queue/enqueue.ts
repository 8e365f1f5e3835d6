import type { Class } from '../decorators/options';
import { RunCancelledError, WaypointError } from '../contract/errors';
import { readPlan } from '../core/plan/plan-reader';
import { checkRunId } from '../core/run/run-id';
import type { EnqueueOptions, EnqueueResult, FleetHost } from '../core/run/fleet-port';

export type { EnqueueOptions, EnqueueResult } from '../core/run/fleet-port';
import type { RunRecord } from '../contract/checkpoint-store';
import { QueueNotConfiguredError } from './errors';
import { DEFAULT_QUEUE, RUN_QUEUE, checkPriority, jobIdFor, queueNameFor, type RunJob, type RunQueue } from '../contract/run-queue';

/**
 * Queues run `runId` of `pipeline` for the fleet's workers. Idempotent: the same run in the same state is
 * one job however often it is enqueued, from any process.
 *
 * A new run's record is created here, with its validated input (encrypted like any run if the store
 * encrypts), so `waypoint.get(runId)` shows it at once: status `paused` with a resume hint that says
 * "queued", since the lifecycle has no queued status and `paused` already means "stopped at a step
 * boundary, safe to continue". The job carries only the run id, never the input.
 * An existing run (paused, failed, waiting, or running under a lease that may expire) gets a job that
 * resumes it; a completed run gets none; a cancelled run is refused. Only the enqueue of a `failed` run
 * retries it (a job of kind `retry`, once per failure however often it is enqueued): a job sent while
 * the run was still open does not run it again should it fail before the job is delivered.
 *
 * @example
 * await enqueue(waypoint, FinancialAnalysis, { runId: 'q3-aapl', input: { ticker: 'AAPL' }, priority: 10 });
 * await enqueue(waypoint, FinancialAnalysis, { runId: 'q3-aapl', input: { ticker: 'AAPL' } }); // no second run
 */
export async function enqueue<I = Record<string, unknown>>(waypoint: FleetHost, pipeline: Class, options: EnqueueOptions<I>): Promise<EnqueueResult> {
  const plan = readPlan(pipeline);
  const runId = checkRunId(options?.runId);
  const priority = checkPriority(options.priority, runId);
  checkGroup(options.group, runId);
  if (options.delayMs !== undefined && !(Number.isFinite(options.delayMs) && options.delayMs >= 0)) {
    throw new WaypointError('INVALID_ARGUMENT', `delayMs of run '${runId}' must be a non-negative number, got ${JSON.stringify(options.delayMs)}.`, { runId });
  }
  const queue = resolveQueue(waypoint, options.queue, 'enqueue()');
  const queueName = queueNameFor(options.queueName ?? DEFAULT_QUEUE, plan.name);
  waypoint.register(pipeline);

  const prepared = await waypoint.prepare(pipeline, { runId, input: options.input }, { ...options.metadata, enqueuedTo: queueName });
  let run = prepared.run;
  const created = prepared.created;
  if (created) run = await markQueued(waypoint, run, queueName);
  if (run.status === 'cancelled') throw new RunCancelledError(runId);
  if (run.status === 'completed') return { runId, queue: queueName, jobId: null, enqueued: false, created, status: 'completed' };

  // Enqueueing a failed run is the one request to run it again: its job is a retry, with an id of its own, so
  // no job the runtime sent for that epoch (a wake-up kept by the queue) is taken for it.
  const kind = run.status === 'failed' ? 'retry' : 'enqueue';
  const jobId = jobIdFor(queueName, runId, run.leaseEpoch, run.createdAt, kind);
  const job: RunJob = { runId, pipeline: plan.name, epoch: run.leaseEpoch, enqueuedAt: new Date().toISOString(), kind };
  if (options.group !== undefined) job.group = options.group;
  const enqueued = await queue.send(queueName, job, { id: jobId, priority, delayMs: options.delayMs });
  return { runId, queue: queueName, jobId, enqueued, created, status: run.status };
}

/**
 * The run queue a Waypoint uses: `given`, else its container's `RUN_QUEUE` binding.
 *
 * @example
 * const queue = resolveQueue(waypoint); await queue.counts('waypoint.financial-analysis');
 */
export function resolveQueue(waypoint: FleetHost, given?: RunQueue, what = 'The fleet'): RunQueue {
  if (given) return given;
  if (waypoint.container.isBound(RUN_QUEUE)) return waypoint.container.get(RUN_QUEUE);
  throw new QueueNotConfiguredError(what);
}

/**
 * Closes the Waypoint's bound run queue, if any (`waypoint.close()` closes only the store).
 *
 * @example
 * await closeQueue(waypoint); await waypoint.close();
 */
export async function closeQueue(waypoint: FleetHost): Promise<void> {
  if (waypoint.container.isBound(RUN_QUEUE)) await waypoint.container.get(RUN_QUEUE).close();
}

/** A freshly created run waits for a worker: `paused`, with a hint saying where it is queued. */
async function markQueued(waypoint: FleetHost, run: RunRecord, queueName: string): Promise<RunRecord> {
  const resumeHint = `Queued on '${queueName}' since ${new Date().toISOString()}; a fleet worker will start it. waypoint.resume('${run.runId}') would run it in this process instead.`;
  // Unfenced: nobody holds a lease on a run that was created a moment ago and has no job yet.
  await waypoint.store.updateRun(run.runId, { status: 'paused', resumeHint }, null);
  return { ...run, status: 'paused', resumeHint };
}

function checkGroup(group: unknown, runId: string): void {
  if (group !== undefined && (typeof group !== 'string' || group.length === 0 || group.length > 200)) {
    throw new WaypointError('INVALID_ARGUMENT', `The group of run '${runId}' must be a non-empty string of at most 200 characters, got ${JSON.stringify(group)}.`, { runId });
  }
}
