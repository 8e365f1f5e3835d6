import { FAN_OUT_MARK } from '../flow/fan-out';
import type { RunStatus } from '../../contract/checkpoint-store';
import { WaypointError } from '../../contract/errors';

/**
 * The run lifecycle, in one table. `running` is the only status in which steps execute; `completed`
 * and `cancelled` are final; `failed`, `paused` and `waiting` go back to `running` on resume.
 */
const TRANSITIONS: Record<RunStatus, readonly RunStatus[]> = {
  running: ['running', 'paused', 'waiting', 'completed', 'failed', 'cancelled'],
  paused: ['running', 'cancelled'],
  waiting: ['running', 'cancelled'],
  failed: ['running', 'cancelled'],
  completed: [],
  cancelled: [],
};

export function canTransition(from: RunStatus, to: RunStatus): boolean {
  return TRANSITIONS[from].includes(to);
}

/** Throws `INVALID_TRANSITION` when the lifecycle does not allow `from` → `to`. */
export function assertTransition(runId: string, from: RunStatus, to: RunStatus): void {
  if (!canTransition(from, to)) {
    throw new WaypointError('INVALID_TRANSITION', `Run '${runId}' is ${from}; it cannot become ${to}.`, { runId });
  }
}

/** The hint stored with each status: what a person should do next. */
export function resumeHintFor(runId: string, status: RunStatus, detail = ''): string {
  const suffix = detail ? ` ${detail}` : '';
  switch (status) {
    case 'running':
      return `Running.${suffix} If its worker died, run it again or call waypoint.resume('${runId}') once the lease expires.`;
    case 'paused':
      return `Paused${suffix}. Call waypoint.resume('${runId}') (or run it again) to continue from the last checkpoint.`;
    case 'waiting':
      if (detail.includes(FAN_OUT_MARK)) return `Waiting${suffix}. A fleet worker queues it again when its child runs have ended; nothing to do.`;
      return `Waiting${suffix}. Deliver it with waypoint.signal('${runId}', name, payload), then resume.`;
    case 'failed':
      return `Failed${suffix}. Fix the cause, then call waypoint.resume('${runId}') to retry from the failed step.`;
    case 'completed':
      return 'Completed; nothing to resume.';
    case 'cancelled':
      return `Cancelled${suffix}. A cancelled run is never resumed; fork it or start a new run.`;
  }
}
