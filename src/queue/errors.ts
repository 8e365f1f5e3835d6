import { WaypointError, reasonOf } from '../contract/errors';

/**
 * A run queue operation failed (connection lost, server down). Nothing was lost: a job is where it was.
 * A worker backs off and tries again; `enqueue` throws it to its caller, who may retry (it is idempotent).
 *
 * @example
 * try { await enqueue(waypoint, Report, { runId, input }); }
 * catch (err) { if (err instanceof WaypointError && err.code === 'QUEUE_UNAVAILABLE') await retryLater(); else throw err; }
 */
export class QueueUnavailableError extends WaypointError {
  constructor(operation: string, cause: unknown, runId?: string) {
    const reason = reasonOf(cause);
    super(
      'QUEUE_UNAVAILABLE',
      `Run queue failed during ${operation}${runId ? ` for run '${runId}'` : ''}: ${reason}. Nothing was lost: the job is where it was; retry once the queue is reachable.`,
      { runId, cause },
    );
  }
}

/** Wraps any failure of a queue client as `QueueUnavailableError`; Waypoint errors pass through unchanged. */
export function unavailable(operation: string, cause: unknown, runId?: string): WaypointError {
  return cause instanceof WaypointError ? cause : new QueueUnavailableError(operation, cause, runId);
}

/**
 * No `RunQueue` is bound in the Waypoint's container and none was passed.
 *
 * @example
 * await Waypoint.create({ modules: [postgresStorage({ url }), pgBossQueue({ url })] });
 */
export class QueueNotConfiguredError extends WaypointError {
  constructor(what: string) {
    super(
      'QUEUE_NOT_CONFIGURED',
      `${what} needs a run queue, and none is bound. Load pgBossQueue({ url }) (PostgreSQL) or bullmqQueue({ url }) (Redis) into Waypoint.create({ modules: [...] }), or pass { queue }.`,
    );
  }
}
