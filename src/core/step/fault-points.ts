/**
 * Named fault-injection points, for crash tests: the process kills itself with SIGKILL when it reaches the
 * point named in WAYPOINT_FAULT (optionally on its Nth hit: `name@N`). The variable is read once at load;
 * with it unset every point is a single comparison against null.
 *
 * @example
 * WAYPOINT_FAULT=after-effect-before-record@2 node my-pipeline.js   # dies right after the 2nd effect ran
 */
export type FaultPoint =
  | 'before-effect'
  | 'after-effect-before-record'
  | 'after-record-before-checkpoint'
  | 'after-checkpoint-before-next-step'
  /** Fleet worker: the queue handed it a job, the run is not leased yet. */
  | 'after-dequeue-before-lease'
  /** Fleet worker: the run has finished (its last step is recorded), its job is not yet completed in the queue. */
  | 'after-last-step-before-ack'
  /** Fleet fan-out: the parent recorded its item list and queued some of its child runs, not all. */
  | 'before-children-enqueued-all'
  /** Fleet fan-out: a worker ended a parent's last open child (its records are written), the parent is not queued again yet. */
  | 'after-last-child-before-parent-wake'
  /** Fleet fan-out: the parent is reading its ended children's states, before it records anything after its forEach. */
  | 'while-collecting-children';

/** Points any run passes through (`waypoint.run`, in or out of a fleet). */
export const RUNTIME_FAULT_POINTS: readonly FaultPoint[] = ['before-effect', 'after-effect-before-record', 'after-record-before-checkpoint', 'after-checkpoint-before-next-step'];

/** Points only a fleet worker (`startWorker`) passes through, around the queue job of a run. */
export const FLEET_FAULT_POINTS: readonly FaultPoint[] = [
  'after-dequeue-before-lease',
  'after-last-step-before-ack',
  'before-children-enqueued-all',
  'after-last-child-before-parent-wake',
  'while-collecting-children',
];

export const FAULT_POINTS: readonly FaultPoint[] = [...RUNTIME_FAULT_POINTS, ...FLEET_FAULT_POINTS];

const armed = parse(process.env.WAYPOINT_FAULT);
let hits = 0;

function parse(spec: string | undefined): { point: string; on: number } | null {
  if (!spec) return null;
  const [point, nth] = spec.split('@');
  return { point: point, on: nth ? Math.max(1, Number.parseInt(nth, 10) || 1) : 1 };
}

/** Kills the process here if this point is armed (and this is the armed hit). */
export function faultPoint(point: FaultPoint): void {
  if (armed === null || armed.point !== point) return;
  hits += 1;
  if (hits === armed.on) process.kill(process.pid, 'SIGKILL');
}
