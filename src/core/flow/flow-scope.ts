import type { StepRecord } from '../../contract/checkpoint-store';
import { WaypointError } from '../../contract/errors';
import { StepAbandoned, type FlowStart } from '../run/execution';
import type { PipelinePlan } from '../plan/plan-reader';
import { WaitSuspended } from '../step/durable-waits';
import { rowPath, SYSTEM_AGENT } from '../history/row-integrity';

/*
 * The small vocabulary of the interpreter (flow-executor.ts, flow-steps.ts, live-execution.ts, flow-replay.ts): where a node
 * runs, the stop flags and the non-failures that end a branch early, the suffixes of decision paths.
 */

/** Where a node runs: the path prefix of its steps, its memory prefix, and the loop/item around it. */
export interface Scope {
  path: string;
  memory: string;
  iteration?: number;
  item?: unknown;
  itemIndex?: number;
  /** Set when a sibling failed or the run is stopping: start nothing new here. */
  halt: Halt;
}

/** A stop flag shared by the branches of a parallel (or the items of a forEach), inherited downwards. */
export class Halt {
  private own = false;
  constructor(private readonly parent?: Halt) {}
  get halted(): boolean {
    return this.own || (this.parent?.halted ?? false);
  }
  set(): void {
    this.own = true;
  }
}

/** Thrown inside a branch that stopped because a sibling failed; the sibling's error is what counts. */
export class Halted extends Error {}

/** Thrown by a read-only replay at the first thing that was not recorded yet. */
export class NotRecorded extends Error {}

/** A recorded decision's payload. */
export interface Decision {
  value: unknown;
}

/**
 * Loads a child run's state for a read-only replay (null when the child has not completed). With
 * `collectIndex` (a forEach with `onItemError: 'collect'`), a failed or cancelled child gives the error
 * description its parent collected for item `collectIndex`.
 */
export type ChildStateReader = (child: PipelinePlan, runId: string, collectIndex?: number) => Promise<Record<string, unknown> | null>;

/**
 * A point of the top level where everything before is done: after the first `done` entries of the root
 * sequence, between two steps of the top-level agent at entry `done`, or inside the loop at entry `done`
 * after `iterations` iterations. Retention folds the rows before such a point into a base row. A replay
 * passes one to its callback at every such point; it is read during the call (the replay goes on after),
 * and what `snapshot()` returns then stays as it was.
 */
export interface RootBoundary extends FlowStart {
  /** The sequences of the rows the replay took to get here (one per row; carried entries share their base's). */
  consumed: ReadonlySet<number>;
  /** The highest sequence in `consumed` (0 when none). */
  lastConsumed: number;
  /** The state, memories and paths at this point, computed when asked. */
  snapshot(): BoundarySnapshot;
}

/** What a base row written at a root boundary holds. */
export interface BoundarySnapshot {
  state: Record<string, unknown>;
  memories: Map<string, string>;
  /** Paths of the rows (and carried entries) taken to get there. */
  taken: ReadonlySet<string>;
  /** Paths of the steps completed before the boundary (skips and folded steps included). */
  completed: string[];
}

/** Suffixes of decision paths: a step's `when`, a loop's check after an iteration; and of a fork's patch before a step. */
export const WHEN = '#when';
export const UNTIL = '#until';
export const PATCH = '#patch';

/** A child run is waiting for a signal: the parent waits too. */
export class ChildWaiting extends Error {}

export function isRealFailure(reason: unknown): boolean {
  return !(reason instanceof StepAbandoned || reason instanceof Halted || reason instanceof WaitSuspended || reason instanceof ChildWaiting || reason instanceof NotRecorded);
}

/** What `state[into][i]` holds for a child run that failed or was cancelled under `onItemError: 'collect'`. */
export function itemError(error: unknown, runId: string, status: 'failed' | 'cancelled', itemIndex: number): Record<string, unknown> {
  const code = error instanceof WaypointError ? storedCodeOf(error) : typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'ERROR';
  const message = error instanceof Error ? error.message : typeof error === 'object' && error !== null && 'message' in error ? String(error.message) : String(error);
  return { error: { code, message }, runId, status, itemIndex };
}

/** A child run's error as its description shows it: the code the child stored, also when it is not Waypoint's (CHILD_RUN_FAILED keeps that one as its cause). */
function storedCodeOf(error: WaypointError): string {
  const cause = error.cause as { code?: unknown } | undefined;
  return error.code === 'CHILD_RUN_FAILED' && typeof cause?.code === 'string' ? cause.code : error.code;
}

export function isPlainObject(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

export function describeValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  try {
    const text = JSON.stringify(value);
    return text.length > 60 ? `${text.slice(0, 60)}...` : text;
  } catch {
    return typeof value;
  }
}

/** A row's path: its own, or `agentId/stepName` for a step of a straight line (and rows of earlier releases). */
export function pathOf(row: StepRecord): string {
  // A system row without a path (a base or patch row) keys by its sequence: it is never a step or decision.
  return row.agentId === SYSTEM_AGENT && !row.path ? `${SYSTEM_AGENT}/${row.stepName}/${row.sequence}` : rowPath(row);
}
