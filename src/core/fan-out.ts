import type { RunRecord, RunStatus } from '../contract/checkpoint-store';
import type { PipelinePlan } from './plan-reader';
import { deserialize } from './serializer';

/**
 * Fan-out across the fleet (issue 21): a `forEach` over a `@Pipeline` class, in a run a fleet worker
 * executes, queues one child run per item instead of running them in the parent's process.
 *
 * The design keeps every decision in the store, so a SIGKILL anywhere leaves nothing that only a dead
 * process knew:
 *
 * - The parent records the item list (a decision row, as in process), then on every execution it lists
 *   its children (`RunFilter.parentRunId`) and tops them up: each child run that does not exist yet is
 *   created (parent id, item and this fan-out's {@link FanOutMeta} in its metadata) and then queued, in
 *   item order, until `concurrency` children are open (not completed, failed or cancelled). Children that
 *   exist but are still queued (`paused`) are queued again: the job id is derived from the run, so a
 *   second send is a no-op, and a parent killed between creating a child and queueing it repairs it on
 *   its next execution. Then the parent returns `waiting`: its lease is released, its worker slot freed.
 * - The worker that ends a child (completed, failed or cancelled) lists the siblings and wakes the parent
 *   (queues it again, job id derived from the parent's lease epoch, so racing workers send one job) when
 *   {@link parentWakeDue} says so: no sibling is open any more, or items are left to start (a bounded
 *   fan-out: the parent starts the next one on each wake), or a sibling failed and the fan-out fails on
 *   an item error. The lease makes one execution of the parent at a time either way.
 * - When every child has ended, the parent reads their final states in item order into `state[into]`.
 * - Safety net: the orphan sweep of every worker also looks at `waiting` runs marked as waiting for a
 *   fan-out ({@link FAN_OUT_MARK} in the resume hint) and wakes those whose children are due, so a
 *   worker killed after ending the last child but before waking the parent costs one sweep period.
 */

/** What a child run of a distributed forEach carries in its metadata (key `fanOut`, as JSON). */
export interface FanOutMeta {
  /** The forEach's path in the parent (`forEach(reports)`, or nested: `forEach(files)[3]/forEach(reports)`). */
  at: string;
  /** Items of the forEach. */
  items: number;
  /** Children of this forEach open at once, at most. */
  concurrency: number;
  onItemError: 'fail' | 'collect';
}

/** Part of the resume hint of a parent waiting for its fleet children: the orphan sweep looks for it. */
export const FAN_OUT_MARK = '[fan-out]';

const ENDED: ReadonlySet<RunStatus> = new Set<RunStatus>(['completed', 'failed', 'cancelled']);

/** True when a child run has ended for its parent's purposes (completed, failed or cancelled). */
export function childEnded(run: Pick<RunRecord, 'status'>): boolean {
  return ENDED.has(run.status);
}

/** The fan-out a run is a child of, from its metadata; undefined for any other run. */
export function fanOutOf(run: Pick<RunRecord, 'metadata'>): FanOutMeta | undefined {
  let meta: Record<string, string> | null;
  try {
    meta = deserialize<Record<string, string> | null>(run.metadata);
  } catch {
    return undefined;
  }
  if (!meta || typeof meta.fanOut !== 'string') return undefined;
  try {
    return JSON.parse(meta.fanOut) as FanOutMeta;
  } catch {
    return undefined;
  }
}

/**
 * Whether the parent of the fan-out `meta` should be queued again, given all its child runs (`children`,
 * as listed by parent id; those of other fan-outs of the same parent are ignored).
 */
export function parentWakeDue(meta: FanOutMeta, children: readonly RunRecord[]): boolean {
  const mine = children.filter((child) => fanOutOf(child)?.at === meta.at);
  const open = mine.filter((child) => !childEnded(child)).length;
  if (open === 0) return true;
  if (mine.length < meta.items && open < meta.concurrency) return true;
  return meta.onItemError === 'fail' && mine.some((child) => child.status === 'failed' || child.status === 'cancelled');
}

/** What a distributed forEach asks of the runtime (the Waypoint gives it to fleet-run executions). */
export type FanOutRunner = (
  child: PipelinePlan,
  spec: { parentRunId: string; at: string; runIdOf: (index: number) => string; items: readonly unknown[]; concurrency: number; onItemError: 'fail' | 'collect' },
) => Promise<FanOutOutcome>;

/** A distributed forEach after one look at its children. */
export type FanOutOutcome =
  /** Children are still open: the parent waits (detail for the resume hint). */
  | { status: 'waiting'; detail: string }
  /** Every child has ended (or one failed, when failing on item errors): results in item order. */
  | { status: 'ended'; results: unknown[]; failed: { index: number; runId: string; error: unknown } | null };
