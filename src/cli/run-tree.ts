import type { FlowNode } from '../core/plan/flow-plan';
import type { PipelinePlan } from '../core/plan/plan-reader';
import { constructsByLabel, kindFromRows, scopesFromRows, type RowConstruct, type RowScope, type ScopeEntry } from '../core/history/flow-scopes';
import { rowPath } from '../core/history/row-integrity';
import type { OperationRecord, RunRecord, StepRecord } from '../contract/checkpoint-store';
import { errorMessage } from './timeline';

/** Where a part of a control-flow run stands. */
/** `queued`: a forEach item's child run created and queued for the fleet, not taken by a worker yet. */
export type TreeStatus = 'completed' | 'skipped' | 'failed' | 'running' | 'queued' | 'pending';

/** One step of the tree: its row, or no row yet (pending, or failed/running per the operations log). */
export interface TreeStep {
  kind: 'step';
  /** The step's full path (`forEach(reviews)[17]/FileReviewer/review`). */
  path: string;
  /** `agentId/stepName`. */
  step: string;
  status: TreeStatus;
  sequence: number | null;
  durationMs: number | null;
  attempt: number | null;
  /** The last failed attempt's error, for a step without a row. */
  error: string | null;
}

/** A parallel branch, a loop iteration, the chosen case of a branch or a forEach item. */
export interface TreePart {
  /** The key in brackets: branch index, iteration, case, item index. */
  key: string;
  status: TreeStatus;
  children: TreeNode[];
  /** A loop iteration's recorded check: true = the loop stopped after it, false = it went on, null = not checked yet. */
  until?: boolean | null;
  /** A forEach item run as a child run: its id and the child run's own status (null when not created yet). */
  childRunId?: string;
  childRunStatus?: string | null;
}

/** A construct of the tree. */
export interface TreeConstruct {
  kind: 'parallel' | 'loop' | 'branch' | 'forEach' | 'group';
  label: string;
  /** Scope plus label (`forEach(files)[3]/loop`). */
  path: string;
  status: TreeStatus;
  parts: TreePart[];
  /** branch: the recorded case (null: not decided yet). */
  chosen?: string | null;
  /** branch with the plan: every case. */
  cases?: string[];
  /** forEach: the recorded item count (null: items not taken yet). */
  itemCount?: number | null;
  /** forEach: items by status. */
  counts?: Record<TreeStatus, number>;
  /** forEach over a `@Pipeline`: its name when the plan says so, else 'child runs' seen. */
  childPipeline?: string | null;
}

export type TreeNode = TreeStep | TreeConstruct;

/** The tree of a control-flow run, and the child runs not placed under a forEach. */
export interface RunTree {
  nodes: TreeNode[];
  /** Child runs whose forEach is unknown without the plan (ids not `<run>/<into>/<index>` of a known label). */
  otherChildren: { runId: string; status: string }[];
}

export { isFlowRun } from '../core/history/flow-scopes';

/**
 * Builds the tree of a control-flow run from its rows: scopes from the path segments (`parallel[1]`,
 * `loop[2]`, `branch[high]`, `forEach(reviews)[17]`), decisions from the `$waypoint/decision` rows, items of
 * a forEach over a `@Pipeline` from its child runs. With the pipeline's plan the tree follows the plan's
 * order and shows the parts not started yet as pending; without it, the rows alone say what ran.
 *
 * @example
 * const tree = buildRunTree(run, steps, operations, await store.listRuns({ parentRunId: run.runId }), plan);
 */
export function buildRunTree(run: RunRecord, steps: readonly StepRecord[], operations: readonly OperationRecord[], children: readonly RunRecord[], plan?: PipelinePlan): RunTree {
  // A step that failed (or is failing) has attempts in the operations log but no row; its last attempt is shown.
  const recorded = new Set(steps.map((s) => rowPath(s)));
  const failures = operations
    .filter((op) => op.name.startsWith('attempt:') && op.state === 'failed' && !recorded.has(op.stepKey))
    .map((op) => ({ path: op.stepKey, attempt: Number(op.name.slice('attempt:'.length)), error: op.error === null ? null : errorMessage(op.error) }));
  const root = scopesFromRows(steps, failures);

  const labels: Map<string, FlowNode> = constructsByLabel(plan?.flow);
  const childrenById = new Map(children.map((c) => [c.runId, c]));
  const placed = new Set<string>();
  const ctx: Convert = { run, labels, childrenById, placed, live: run.status === 'running' };
  const nodes = convertScope(root, plan && !plan.linear ? plan.flow : null, '', ctx);
  const otherChildren = children.filter((c) => !placed.has(c.runId)).map((c) => ({ runId: c.runId, status: c.status }));
  return { nodes, otherChildren };
}

interface Convert {
  run: RunRecord;
  labels: Map<string, FlowNode>;
  childrenById: Map<string, RunRecord>;
  placed: Set<string>;
  live: boolean;
}

/** The plan's nodes of a scope, flattened out of sequences. */
function planEntries(node: FlowNode | null): FlowNode[] {
  if (node === null) return [];
  return node.kind === 'sequence' ? node.children.flatMap(planEntries) : [node];
}

/** A scope's nodes: in the plan's order with what has not run as pending, then anything the plan does not name. */
function convertScope(scope: RowScope, planNode: FlowNode | null, prefix: string, ctx: Convert): TreeNode[] {
  const out: TreeNode[] = [];
  const used = new Set<string>();
  for (const node of planEntries(planNode)) {
    if (node.kind === 'agent') {
      for (const step of node.agent.steps) {
        const name = `${node.agent.id}/${step.name}`;
        const entry = scope.entries.get(`s:${name}`);
        used.add(`s:${name}`);
        out.push(
          entry && entry.kind !== 'construct'
            ? treeStep(entry, ctx.run)
            : { kind: 'step', path: `${prefix}${name}`, step: name, status: 'pending', sequence: null, durationMs: null, attempt: null, error: null },
        );
      }
    } else if (node.kind !== 'sequence') {
      used.add(`c:${node.label}`);
      const entry = scope.entries.get(`c:${node.label}`);
      const built = entry?.kind === 'construct' ? entry.construct : { label: node.label, path: `${prefix}${node.label}`, parts: new Map(), untils: new Map(), decision: null };
      out.push(convertConstruct(built, node, prefix, ctx));
    }
  }
  const rest = [...scope.entries].filter(([key]) => !used.has(key)).sort((a, b) => a[1].order - b[1].order);
  for (const [, entry] of rest) {
    out.push(entry.kind === 'construct' ? convertConstruct(entry.construct, ctx.labels.get(entry.construct.label) ?? null, prefix, ctx) : treeStep(entry, ctx.run));
  }
  return out;
}

/** A step of the tree from its row, or from its failed attempts (failed when the run failed, else being retried). */
function treeStep(entry: Exclude<ScopeEntry, { kind: 'construct' }>, run: RunRecord): TreeStep {
  if (entry.kind === 'failed') {
    const { failure } = entry;
    return {
      kind: 'step',
      path: entry.path,
      step: entry.step,
      status: run.status === 'failed' ? 'failed' : 'running',
      sequence: null,
      durationMs: null,
      attempt: failure.attempt ?? null,
      error: failure.error ?? null,
    };
  }
  const { row } = entry;
  return {
    kind: 'step',
    path: rowPath(row),
    step: `${row.agentId}/${row.stepName}`,
    status: row.status,
    sequence: row.sequence,
    durationMs: row.completedAt.getTime() - row.startedAt.getTime(),
    attempt: row.attempt,
    error: null,
  };
}

function kindOf(built: RowConstruct, planNode: FlowNode | null): TreeConstruct['kind'] {
  return planNode && planNode.kind !== 'agent' && planNode.kind !== 'sequence' ? planNode.kind : kindFromRows(built);
}

function convertConstruct(built: RowConstruct, planNode: FlowNode | null, prefix: string, ctx: Convert): TreeConstruct {
  const kind = kindOf(built, planNode);
  const partPrefix = (key: string) => `${prefix}${built.label}[${key}]/`;
  const sortedKeys = [...built.parts.keys()].sort((a, b) => (isIndex(a) && isIndex(b) ? Number(a) - Number(b) : built.parts.get(a)!.order - built.parts.get(b)!.order));
  const part = (key: string, body: FlowNode | null): TreePart => {
    const children = convertScope(built.parts.get(key)?.scope ?? { key, path: `${built.path}[${key}]`, entries: new Map() }, body, partPrefix(key), ctx);
    return { key, status: statusOf(children), children };
  };
  const node: TreeConstruct = { kind, label: built.label, path: built.path, status: 'pending', parts: [] };

  if (kind === 'parallel') {
    const branches = planNode?.kind === 'parallel' ? planNode.branches : null;
    const keys = branches ? [...new Set([...branches.map((_, i) => String(i)), ...sortedKeys])] : sortedKeys;
    node.parts = keys.map((key) => part(key, branches?.[Number(key)] ?? null));
  } else if (kind === 'loop') {
    const body = planNode?.kind === 'loop' ? planNode.body : null;
    const keys = [...new Set([...sortedKeys, ...built.untils.keys()])].sort((a, b) => Number(a) - Number(b));
    node.parts = keys.map((key) => ({ ...part(key, body), until: built.untils.has(key) ? built.untils.get(key)! : null }));
  } else if (kind === 'branch') {
    node.chosen = built.decision && typeof built.decision.value === 'string' ? built.decision.value : null;
    if (planNode?.kind === 'branch') node.cases = [...planNode.cases.keys()];
    const keys = node.chosen !== null ? [...new Set([node.chosen, ...sortedKeys])] : sortedKeys;
    node.parts = keys.map((key) => part(key, planNode?.kind === 'branch' ? (planNode.cases.get(key) ?? null) : null));
  } else if (kind === 'forEach') {
    forEachParts(node, built, planNode?.kind === 'forEach' ? planNode : null, sortedKeys, part, prefix, ctx);
  } else {
    node.parts = sortedKeys.map((key) => part(key, null));
  }
  node.status = constructStatus(node);
  return node;
}

function forEachParts(
  node: TreeConstruct,
  built: RowConstruct,
  planNode: Extract<FlowNode, { kind: 'forEach' }> | null,
  keys: string[],
  part: (key: string, body: FlowNode | null) => TreePart,
  prefix: string,
  ctx: Convert,
): void {
  const items = built.decision && Array.isArray(built.decision.value) ? built.decision.value : null;
  node.itemCount = items ? items.length : null;
  const indexes = [...new Set([...(items ? items.map((_, i) => String(i)) : []), ...keys])].sort((a, b) => Number(a) - Number(b));
  const into = planNode?.into ?? /^forEach\((.*)\)/.exec(built.label)?.[1] ?? null;
  // An item's child run is `<run>/<scope path>/<into>/<index>` (the scope path is empty at the top level).
  const childIds = into === null ? [] : indexes.map((i) => `${ctx.run.runId}/${prefix}${into}/${i}`);
  const anyChild = childIds.some((id) => ctx.childrenById.has(id));
  // A distributed agent or sequence body has child runs only when it ran on a fleet (in process, its items are rows here).
  const isChild = planNode ? planNode.child !== null || (planNode.distributed !== null && anyChild) : anyChild;
  if (isChild) {
    node.childPipeline = planNode?.child?.name ?? (planNode?.distributed ? (childIds.map((id) => ctx.childrenById.get(id)).find(Boolean)?.pipelineName ?? null) : null);
    node.parts = indexes.map((key, i) => {
      const child = ctx.childrenById.get(childIds[i]) ?? null;
      if (child) ctx.placed.add(child.runId);
      return { key, status: child ? runStatus(child) : 'pending', children: [], childRunId: childIds[i], childRunStatus: child?.status ?? null };
    });
  } else {
    node.parts = indexes.map((key) => part(key, planNode?.body ?? null));
    // Without the plan an item's steps are known only by comparison: one lacking a step another item has is unfinished.
    if (!planNode && ctx.run.status !== 'completed') {
      const names = (p: TreePart) => p.children.filter((c) => c.kind === 'step').map((c) => c.step);
      const all = new Set(node.parts.flatMap(names));
      for (const p of node.parts) if (p.status === 'completed' && names(p).length < all.size) p.status = 'running';
    }
  }
  node.counts = { completed: 0, skipped: 0, failed: 0, running: 0, queued: 0, pending: 0 };
  for (const p of node.parts) node.counts[p.status] += 1;
}

/** An item's child run as the tree counts it: one queued for the fleet and never taken by a worker is `queued`, not `running`. */
export function runStatus(child: Pick<RunRecord, 'status' | 'leaseEpoch' | 'lastSequence'>): TreeStatus {
  if (child.status === 'completed') return 'completed';
  if (child.status === 'failed' || child.status === 'cancelled') return 'failed';
  if (isQueuedChild(child)) return 'queued';
  return 'running';
}

/** A child run created and queued (`paused`, its lease never taken, nothing recorded): no worker has started it. */
export function isQueuedChild(child: Pick<RunRecord, 'status' | 'leaseEpoch' | 'lastSequence'>): boolean {
  return child.status === 'paused' && child.leaseEpoch === 0 && child.lastSequence === 0;
}

/** A group of nodes: failed if any failed, completed/skipped when all are, pending when none started. */
function statusOf(nodes: readonly { status: TreeStatus }[]): TreeStatus {
  if (nodes.length === 0) return 'pending';
  if (nodes.some((n) => n.status === 'failed')) return 'failed';
  if (nodes.every((n) => n.status === 'skipped')) return 'skipped';
  if (nodes.every((n) => n.status === 'completed' || n.status === 'skipped')) return 'completed';
  if (nodes.every((n) => n.status === 'pending')) return 'pending';
  return 'running';
}

function constructStatus(node: TreeConstruct): TreeStatus {
  if (node.kind === 'loop') {
    const last = node.parts[node.parts.length - 1];
    if (node.parts.some((p) => p.status === 'failed')) return 'failed';
    if (last?.until === true) return 'completed';
    return node.parts.length === 0 ? 'pending' : 'running';
  }
  if (node.kind === 'branch' && node.chosen === null) return 'pending';
  if (node.kind === 'branch' && node.parts.every((p) => p.children.length === 0)) return 'completed';
  if (node.kind === 'forEach' && node.itemCount === 0) return 'completed';
  if (node.kind === 'forEach' && node.itemCount === null) return 'pending';
  return statusOf(node.parts);
}

function isIndex(text: string): boolean {
  return /^\d+$/.test(text);
}
