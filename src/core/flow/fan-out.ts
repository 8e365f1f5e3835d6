import type { CheckpointStore, RunFilter, RunRecord, RunStatus, StepRecord } from '../../contract/checkpoint-store';
import type { Class } from '../../decorators/options';
import { Pipeline } from '../../decorators/pipeline';
import { WaypointError } from '../../contract/errors';
import type { FlowNode, ForEachNode } from '../plan/flow-plan';
import { readPlan, type PipelinePlan } from '../plan/plan-reader';
import { SYSTEM_AGENT } from '../history/row-integrity';
import { deserialize } from '../state/value-decoder';

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
 *
 * `{ distribute: true }` with an agent or a sequence of agents as the body works the same way: the body
 * becomes a hidden child pipeline ({@link itemPlanOf}: the parent's name with `:items:<forEach label>`,
 * its version and state class, the body as its agents), registered wherever the parent is (a worker of
 * the parent's pipeline takes its items too). Each item is a child run of it (ids derived from the
 * parent's as above) whose input is the parent's state at the forEach and whose `ctx.item` / `ctx.itemIndex`
 * are the item's; its metadata marks it hidden ({@link FanOutMeta.hidden}) so lists leave it out unless
 * asked. What lands in `state[into][i]` is {@link itemChanges} of its rows: the item's step outputs merged
 * as the in-process forEach merges them (reducers included), so a replay gives the same value every time.
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
  /** An item of a distributed agent or sequence body (not a child run the user declared): lists omit it unless asked. */
  hidden?: boolean;
}

/** Part of the resume hint of a parent waiting for its fleet children: the orphan sweep looks for it. */
export const FAN_OUT_MARK = '[fan-out]';

/**
 * Part of the resume hint of a fan-out parent whose children could not all be queued (the run queue was
 * unavailable): the orphan sweep queues it again whatever its children say, and that execution queues
 * the children left unqueued.
 */
export const FAN_OUT_REDRIVE_MARK = '[fan-out: queueing interrupted]';

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
  spec: {
    parentRunId: string;
    at: string;
    runIdOf: (index: number) => string;
    items: readonly unknown[];
    concurrency: number;
    onItemError: 'fail' | 'collect';
    /** For a distributed agent or sequence body: the parent's state at the forEach, every item's input. */
    state?: Record<string, unknown>;
  },
) => Promise<FanOutOutcome>;

/** A distributed forEach after one look at its children. */
export type FanOutOutcome =
  /** Children are still open: the parent waits (detail for the resume hint). */
  | { status: 'waiting'; detail: string }
  /** Every child has ended (or one failed, when failing on item errors): results in item order. */
  | { status: 'ended'; results: unknown[]; failed: { index: number; runId: string; error: unknown } | null };

const itemPlans = new WeakMap<ForEachNode, PipelinePlan>();
const itemPlanSet = new WeakSet<PipelinePlan>();

/**
 * The hidden child pipeline of a distributed forEach whose body is an agent or a sequence (`node.distributed`):
 * named `<parent>:items:<label>` (characters a pipeline name cannot have become `_`), with the parent's
 * version and state class, so any process that knows the parent makes the same one. Made once per plan.
 */
export function itemPlanOf(parent: PipelinePlan, node: ForEachNode): PipelinePlan {
  let plan = itemPlans.get(node);
  if (plan) return plan;
  if (!node.distributed) throw new WaypointError('INVALID_ARGUMENT', `'${node.label}' of pipeline '${parent.name}' does not distribute an agent or a sequence.`);
  const name = `${parent.name}:items:${node.label.replace(/[^A-Za-z0-9_.:-]/g, '_')}`;
  // A class of its own, named after the pipeline: plans, queues and workers all key on a class.
  const type = { [name]: class {} }[name] as Class;
  Pipeline({ name, version: parent.version, state: parent.state, strictState: parent.strictState, agents: [node.distributed] })(type);
  plan = readPlan(type);
  itemPlans.set(node, plan);
  itemPlanSet.add(plan);
  return plan;
}

/** True for the hidden child pipeline of a distributed agent or sequence body. */
export function isItemPlan(plan: PipelinePlan): boolean {
  return itemPlanSet.has(plan);
}

/** True for a run that is an item of a distributed agent or sequence body (hidden from lists unless asked). */
export function isItemRun(run: Pick<RunRecord, 'metadata' | 'parentRunId'>): boolean {
  return run.parentRunId != null && fanOutOf(run)?.hidden === true;
}

/**
 * The runs `store.listRuns(filter)` gives, without the items of distributed forEach bodies, which belong
 * under their parent (`parentRunId`, `runs show`) rather than in a listing. Nothing is hidden when the
 * filter asks for a run's children or names a pipeline (an item pipeline named is asked for). With a
 * `limit`, the page stays full: the listing is read again with a doubled limit until enough runs are
 * shown or the store has no more, so hidden items never cost more than the pages they fill.
 *
 * @example
 * const runs = await listShownRuns(store, { status: ['failed'], limit: 50 }); // up to 50 runs, no hidden items
 */
export async function listShownRuns(store: CheckpointStore, filter: RunFilter = {}): Promise<RunRecord[]> {
  const first = await store.listRuns(filter);
  if (filter.parentRunId !== undefined || filter.pipelineName !== undefined || !first.some(isItemRun)) return first;
  const limit = filter.limit;
  if (limit === undefined) return first.filter((run) => !isItemRun(run));
  let read = first;
  let asked = limit;
  for (;;) {
    const shown = read.filter((run) => !isItemRun(run));
    if (shown.length >= limit || read.length < asked) return shown.slice(0, limit);
    asked *= 2;
    read = await store.listRuns({ ...filter, limit: asked });
  }
}

/**
 * The hidden item pipelines of `plan` (and of its child pipelines), for workers and `register`: a worker of
 * a pipeline takes the items its distributed forEaches queue.
 */
export function itemPipelinesOf(plan: PipelinePlan): Class[] {
  const found: Class[] = [];
  const walk = (node: FlowNode | null | undefined, owner: PipelinePlan): void => {
    if (!node) return;
    switch (node.kind) {
      case 'agent':
        return;
      case 'sequence':
        return node.children.forEach((child) => walk(child, owner));
      case 'parallel':
        return node.branches.forEach((branch) => walk(branch, owner));
      case 'loop':
        return walk(node.body, owner);
      case 'branch':
        return [...node.cases.values()].forEach((body) => walk(body, owner));
      case 'forEach':
        if (node.distributed) found.push(itemPlanOf(owner, node).pipeline);
        if (node.child) walk(node.child.flow, node.child);
        return walk(node.body, owner);
    }
  };
  walk(plan.flow, plan);
  return [...new Set(found)];
}

/**
 * What an item of a distributed agent or sequence body gives its parent's `state[into][i]`: its step
 * outputs (and fork patches) in record order, each property merged as the in-process forEach's item frame
 * merges it (the first value as is, later ones through the property's reducer). Throws when retention has
 * folded the item's rows into a base row (the outputs are gone; keep `compactEvery` above an item's steps).
 */
export function itemChanges(runId: string, rows: readonly StepRecord[], reducers: PipelinePlan['reducers']): Record<string, unknown> {
  const delta: Record<string, unknown> = {};
  for (const row of rows) {
    if (row.agentId === SYSTEM_AGENT) {
      if (row.stepName === 'base') {
        throw new WaypointError(
          'ITEM_RECORDS_FOLDED',
          `Item run '${runId}' has had its rows folded by retention, so its step outputs for the parent's forEach are gone. Raise retention's compactEvery above the item's step count and run the item again (fork it).`,
          { runId },
        );
      }
      if (!row.path?.endsWith('#patch')) continue;
    } else if (row.status !== 'completed') continue;
    const update = deserialize<Record<string, unknown>>(row.output);
    for (const key of Object.keys(update)) {
      const reducer = Object.prototype.hasOwnProperty.call(reducers, key) ? reducers[key] : undefined;
      const value = reducer && Object.prototype.hasOwnProperty.call(delta, key) ? reducer(delta[key], update[key]) : update[key];
      Object.defineProperty(delta, key, { value, enumerable: true, writable: true, configurable: true });
    }
  }
  return delta;
}
