import { WaypointError, describeError } from '../core/errors';
import { TOKENS } from '../core/tokens';
import { holderIsDead } from '../core/run-lease';
import type { Waypoint } from '../core/waypoint';
import type { RunRecord, RunStatus } from '../storage/checkpoint-store';
import { DEFAULT_QUEUE, RUN_QUEUE, jobIdFor, queueNameFor, type RunQueue } from './run-queue';

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
}

/** What a sweep did with one orphan. */
export interface OrphanAction {
  runId: string;
  pipeline: string;
  /** enqueued / already-queued (enqueue mode), resumed / locked / failed (resume mode, or a failed send). */
  action: 'enqueued' | 'already-queued' | 'resumed' | 'locked' | 'failed';
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
  /** Status after a resume. */
  status?: RunStatus;
  error?: string;
}

/** A `running` run that was never leased gets this long before it counts as orphaned (its creator may be about to lease it). */
export const UNLEASED_GRACE_MS = 5_000;

/**
 * Finds runs in `running` whose executor is gone (lease expired, or its holder is a dead process on this
 * host) and resumes or re-enqueues them. Works without a queue: in 'resume' mode any process that has the
 * pipelines registered can run it (from cron, on start-up). A run that is merely `paused` or `waiting`
 * is not an orphan: it stopped on purpose.
 *
 * @example
 * const actions = await recoverOrphans(waypoint, { olderThanMs: 5_000 });
 * for (const a of actions) console.log(a.runId, a.action, a.status);
 */
export async function recoverOrphans(waypoint: Waypoint, options: RecoverOrphansOptions = {}): Promise<OrphanAction[]> {
  const olderThanMs = options.olderThanMs ?? 0;
  if (!(Number.isFinite(olderThanMs) && olderThanMs >= 0)) {
    throw new WaypointError('INVALID_ARGUMENT', `recoverOrphans: olderThanMs must be a non-negative number, got ${JSON.stringify(options.olderThanMs)}.`);
  }
  const queue = options.queue ?? (waypoint.container.isBound(RUN_QUEUE) ? waypoint.container.get(RUN_QUEUE) : undefined);
  const mode = options.mode ?? (queue ? 'enqueue' : 'resume');
  if (mode === 'enqueue' && !queue) {
    throw new WaypointError('QUEUE_NOT_CONFIGURED', "recoverOrphans({ mode: 'enqueue' }) needs a run queue: pass { queue } or bind pgBossQueue / bullmqQueue.");
  }
  const running = await waypoint.store.listRuns({ status: 'running', pipelineName: options.pipelineName, limit: options.limit ?? 1000 });
  const now = Date.now();
  const orphans = running.filter((run) => isOrphan(run, now, olderThanMs));
  if (orphans.length === 0) return [];
  const logger = waypoint.container.get(TOKENS.Logger);
  logger.warn('orphaned runs found', { count: orphans.length, mode, runIds: orphans.slice(0, 20).map((r) => r.runId) });
  if (mode === 'enqueue') return Promise.all(orphans.map((run) => reenqueue(queue!, options.queueName ?? DEFAULT_QUEUE, run)));
  return resumeAll(waypoint, orphans, Math.max(1, options.concurrency ?? 1));
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
export function startOrphanSweeper(
  waypoint: Waypoint,
  options: RecoverOrphansOptions & { everyMs: number; onSweep?: (actions: OrphanAction[]) => void },
): OrphanSweeper {
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
    const job = { runId: run.runId, pipeline: run.pipelineName, epoch: run.leaseEpoch, enqueuedAt: new Date().toISOString() };
    const sent = await queue.send(name, job, { id: jobIdFor(name, run.runId, run.leaseEpoch, run.createdAt) });
    return { ...action, action: sent ? 'enqueued' : 'already-queued' };
  } catch (error) {
    return { ...action, action: 'failed', error: error instanceof Error ? error.message : String(error) };
  }
}

async function resumeAll(waypoint: Waypoint, orphans: RunRecord[], concurrency: number): Promise<OrphanAction[]> {
  const results: OrphanAction[] = new Array(orphans.length);
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < orphans.length; i = next++) {
      const run = orphans[i]!;
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
