import { faultPoint, type FaultPoint } from './fault-points';

/**
 * In-process crash points, for the test kit (`crashTest` in waypoint-durable/testing): a hook a Waypoint is
 * given through its container (bound under {@link CRASH_HOOK}) and that the runtime calls at every boundary
 * where a process could die. The hook may throw to abandon the execution there; the kit makes the store of
 * that execution refuse everything afterwards, so nothing after the point is written, as after a SIGKILL.
 * Unbound (every Waypoint outside the kit) each point costs one comparison against undefined.
 */
export type CrashPointKind =
  /** A step returned; its row is not appended yet. */
  | 'before-step-row'
  /** A step's row is committed; nothing after it has started. */
  | 'after-step-row'
  /** A side effect (a `@SideEffect`, a `durable()` call, a sleep or a wait) is about to run its body. */
  | 'before-effect'
  /** The effect's body returned; its outcome is not recorded yet. */
  | 'after-effect'
  /** The effect's outcome is recorded (committed, or inside the step's transaction). */
  | 'effect-recorded'
  /** A forEach item (or a parallel branch) is about to start. */
  | 'before-item'
  | 'before-branch';

/** Where a crash point is: its kind, the step (or construct) path, and for effects the operation and its key. */
export interface CrashPointSite {
  readonly kind: CrashPointKind;
  /** The step's path (`agent/step`, or its path in a control-flow tree); for items and branches the item's or branch's path. */
  readonly step: string;
  readonly runId: string;
  /** Effects only: the operation name (`send-email`, `durable:ai:tool:search`, `waypoint:sleep`). */
  readonly operation?: string;
  /** Effects only: the operation key. */
  readonly key?: string;
  /** Effects only: true when the effect runs inside the step's transaction (its writes roll back with a crash). */
  readonly transactional?: boolean;
}

/** Called at each crash point; throwing abandons the execution at that point. */
export type CrashHook = (site: CrashPointSite) => void;

/** Container token of the crash hook (bound only by the test kit). */
export const CRASH_HOOK = Symbol.for('waypoint:CrashHook');

/**
 * A step boundary: the SIGKILL fault point named `fault` (WAYPOINT_FAULT) and the kit's crash point of
 * `kind`, in one call; with no hook bound, what the fault point alone cost plus one comparison.
 */
export function stepBoundary(fault: FaultPoint, crash: CrashHook | undefined, kind: CrashPointKind, runId: string, step: string): void {
  faultPoint(fault);
  if (crash !== undefined) crash({ kind, step, runId });
}

/** The same inside a side effect (`fault` null where no fault point is named): the hook learns the operation and its key. */
export function effectBoundary(
  fault: FaultPoint | null,
  kind: CrashPointKind,
  step: { readonly crash?: CrashHook; readonly runId: string; readonly stepKey: string },
  call: { readonly name: string; readonly key: string },
  transactional: boolean,
): void {
  if (fault !== null) faultPoint(fault);
  if (step.crash !== undefined) step.crash({ kind, step: step.stepKey, runId: step.runId, operation: call.name, key: call.key, transactional });
}
