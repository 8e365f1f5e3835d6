import type { Class } from '../decorators/options';
import { RunCancelledError, WaypointError } from '../contract/errors';
import { readPlan } from '../core/plan-reader';
import { checkRunId } from '../core/run-id';
import type { Waypoint } from '../core/waypoint';
import type { RunRecord, RunStatus } from '../contract/checkpoint-store';
import { QueueNotConfiguredError } from './errors';
import { DEFAULT_QUEUE, RUN_QUEUE, checkPriority, jobIdFor, queueNameFor, type RunJob, type RunQueue } from './run-queue';

/** Options of {@link enqueue}. */
export interface EnqueueOptions<I = Record<string, unknown>> {
  runId: string;
  /** Input of a new run (validated now, stored with the run). Omit it (or pass the same) for an existing run. */
  input?: I;
  /** Higher runs first: an integer in [-1000000, 1000000]. Default 0. */
  priority?: number;
  /** Concurrency group (a tenant, a customer): workers cap the runs of one group (`groupConcurrency`). */
  group?: string;
  /** Not before this many ms from now. */
  delayMs?: number;
  /** The queue to use. Default: the `RUN_QUEUE` binding of the Waypoint's container. */
  queue?: RunQueue;
  /** Base queue name (workers must use the same). Default 'waypoint'. */
  queueName?: string;
}

/** What {@link enqueue} did. */
export interface EnqueueResult {
  runId: string;
  /** Queue name of the run's pipeline. */
  queue: string;
  /** Id of the job that will advance the run; null when there is nothing left to run (completed). */
  jobId: string | null;
  /** True when this call created the job; false when the same job was already queued. */
  enqueued: boolean;
  /** True when this call created the run record. */
  created: boolean;
  /** The run's stored status after the call (`paused` while queued: see below). */
  status: RunStatus;
}

/**
 * Queues run `runId` of `pipeline` for the fleet's workers. Idempotent: the same run in the same state is
 * one job however often it is enqueued, from any process.
 *
 * A new run's record is created here, with its validated input (encrypted like any run if the store
 * encrypts), so `waypoint.get(runId)` shows it at once: status `paused` with a resume hint that says
 * "queued", since the lifecycle has no queued status and `paused` already means "stopped at a step
 * boundary, safe to continue". The job carries only the run id, never the input.
 * An existing run (paused, failed, waiting, or running under a lease that may expire) gets a job that
 * resumes it; a completed run gets none; a cancelled run is refused.
 *
 * @example
 * await enqueue(waypoint, FinancialAnalysis, { runId: 'q3-aapl', input: { ticker: 'AAPL' }, priority: 10 });
 * await enqueue(waypoint, FinancialAnalysis, { runId: 'q3-aapl', input: { ticker: 'AAPL' } }); // no second run
 */
export async function enqueue<I = Record<string, unknown>>(waypoint: Waypoint, pipeline: Class, options: EnqueueOptions<I>): Promise<EnqueueResult> {
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

  const prepared = await waypoint.prepare(pipeline, { runId, input: options.input }, { enqueuedTo: queueName });
  let run = prepared.run;
  const created = prepared.created;
  if (created) run = await markQueued(waypoint, run, queueName);
  if (run.status === 'cancelled') throw new RunCancelledError(runId);
  if (run.status === 'completed') return { runId, queue: queueName, jobId: null, enqueued: false, created, status: 'completed' };

  const jobId = jobIdFor(queueName, runId, run.leaseEpoch, run.createdAt);
  const job: RunJob = { runId, pipeline: plan.name, epoch: run.leaseEpoch, enqueuedAt: new Date().toISOString() };
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
export function resolveQueue(waypoint: Waypoint, given?: RunQueue, what = 'The fleet'): RunQueue {
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
export async function closeQueue(waypoint: Waypoint): Promise<void> {
  if (waypoint.container.isBound(RUN_QUEUE)) await waypoint.container.get(RUN_QUEUE).close();
}

/** A freshly created run waits for a worker: `paused`, with a hint saying where it is queued. */
async function markQueued(waypoint: Waypoint, run: RunRecord, queueName: string): Promise<RunRecord> {
  const resumeHint = `Queued on '${queueName}' since ${new Date().toISOString()}; a fleet worker will start it. waypoint.resume('${run.runId}') would run it in this process instead.`;
  // Unfenced: nobody holds a lease on a run that was created a moment ago and has no job yet.
  await waypoint.store.updateRun(run.runId, { status: 'paused', resumeHint }, null);
  return { ...run, status: 'paused', resumeHint };
}


function checkGroup(group: unknown, runId: string): void {
  if (group !== undefined && (typeof group !== 'string' || group.length === 0 || group.length > 200)) {
    throw new WaypointError('INVALID_ARGUMENT', `group of run '${runId}' must be a non-empty string of at most 200 characters, got ${JSON.stringify(group)}.`, { runId });
  }
}
