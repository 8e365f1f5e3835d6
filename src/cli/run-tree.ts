import type { FlowNode } from '../core/flow-plan';
import type { PipelinePlan } from '../core/plan-reader';
import { rowPath, SYSTEM_AGENT } from '../core/row-integrity';
import type { OperationRecord, RunRecord, StepRecord } from '../storage/checkpoint-store';
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

/** Whether a run needs the tree view: a row with a path, a decision row, child runs, or a plan with constructs. */
export function isFlowRun(steps: readonly StepRecord[], children: readonly RunRecord[], plan: PipelinePlan | undefined): boolean {
  return plan?.flow !== undefined || children.length > 0 || steps.some((s) => (s.path ?? null) !== null || (s.agentId === SYSTEM_AGENT && s.stepName === 'decision'));
}

interface ScopeBuild {
  entries: Map<string, { order: number; step?: TreeStep; construct?: ConstructBuild }>;
}
interface ConstructBuild {
  label: string;
  path: string;
  parts: Map<string, { order: number; scope: ScopeBuild }>;
  untils: Map<string, boolean>;
  decision: { value: unknown } | null;
}

const SEGMENT = /^(.*)\[([^\]]*)\]$/;

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
  const tree = new ScopeTreeBuilder();
  for (const row of steps) tree.addRow(row);
  // A step that failed (or is failing) has attempts in the operations log but no row.
  const recorded = new Set(steps.map((s) => rowPath(s)));
  const failures = operations.filter((op) => op.name.startsWith('attempt:') && op.state === 'failed' && !recorded.has(op.stepKey));
  for (const op of failures) tree.addFailedAttempt(op, run.status === 'failed' ? 'failed' : 'running');

  const labels = new Map<string, FlowNode>();
  if (plan?.flow) collectLabels(plan.flow, labels);
  const childrenById = new Map(children.map((c) => [c.runId, c]));
  const placed = new Set<string>();
  const ctx: Convert = { run, labels, childrenById, placed, live: run.status === 'running' };
  const nodes = convertScope(tree.root, plan?.flow ?? null, '', ctx);
  const otherChildren = children.filter((c) => !placed.has(c.runId)).map((c) => ({ runId: c.runId, status: c.status }));
  return { nodes, otherChildren };
}

/** The scopes of a control-flow run, built from its rows: constructs, their parts (lanes, iterations, items), steps and decisions. */
class ScopeTreeBuilder {
  readonly root: ScopeBuild = { entries: new Map() };

  /** A step row in its scope, or a decision row on its construct (an `#until` decision on its loop iteration). */
  addRow(row: StepRecord): void {
    if (row.agentId === SYSTEM_AGENT) {
      if (row.stepName !== 'decision' || !row.path || row.path.endsWith('#when')) return;
      const value = decisionValue(row.output);
      const until = /^(.*)\[([^\]]*)\]#until$/.exec(row.path);
      const at = until ? until[1] : row.path;
      const segments = at.split('/');
      const scope = this.scopeOf(segments.slice(0, -1), row.sequence);
      if (!scope) return;
      const construct = this.constructAt(scope, segments[segments.length - 1], at, row.sequence);
      if (until) construct.untils.set(until[2], value === true);
      else construct.decision = { value };
      return;
    }
    const path = rowPath(row);
    this.place(
      path,
      {
        kind: 'step',
        path,
        step: `${row.agentId}/${row.stepName}`,
        status: row.status,
        sequence: row.sequence,
        durationMs: row.completedAt.getTime() - row.startedAt.getTime(),
        attempt: row.attempt,
        error: null,
      },
      row.sequence,
    );
  }

  /** A failed attempt of a step that has no row (it failed, or is being retried), placed after every row. */
  addFailedAttempt(op: OperationRecord, status: 'failed' | 'running'): void {
    const parts = op.stepKey.split('/');
    if (parts.length < 2) return;
    this.place(
      op.stepKey,
      {
        kind: 'step',
        path: op.stepKey,
        step: parts.slice(-2).join('/'),
        status,
        sequence: null,
        durationMs: null,
        attempt: Number(op.name.slice('attempt:'.length)),
        error: op.error === null ? null : errorMessage(op.error),
      },
      Number.MAX_SAFE_INTEGER,
    );
  }

  private constructAt(scope: ScopeBuild, label: string, path: string, order: number): ConstructBuild {
    const key = `c:${label}`;
    let entry = scope.entries.get(key);
    if (!entry) scope.entries.set(key, (entry = { order, construct: { label, path, parts: new Map(), untils: new Map(), decision: null } }));
    entry.order = Math.min(entry.order, order);
    return entry.construct!;
  }

  /** The scope of `segments` (`['loop[1]', ...]`), created on the way down. */
  private scopeOf(segments: string[], order: number): ScopeBuild | null {
    let scope = this.root;
    let prefix = '';
    for (const segment of segments) {
      const match = SEGMENT.exec(segment);
      if (!match) return null;
      const construct = this.constructAt(scope, match[1], `${prefix}${match[1]}`, order);
      let part = construct.parts.get(match[2]);
      if (!part) construct.parts.set(match[2], (part = { order, scope: { entries: new Map() } }));
      scope = part.scope;
      prefix += `${segment}/`;
    }
    return scope;
  }

  private place(path: string, step: TreeStep, order: number): void {
    const segments = path.split('/');
    const scope = this.scopeOf(segments.slice(0, -2), order);
    if (scope) scope.entries.set(`s:${step.step}`, { order, step });
  }
}

interface Convert {
  run: RunRecord;
  labels: Map<string, FlowNode>;
  childrenById: Map<string, RunRecord>;
  placed: Set<string>;
  live: boolean;
}

function collectLabels(node: FlowNode, into: Map<string, FlowNode>): void {
  switch (node.kind) {
    case 'agent':
      return;
    case 'sequence':
      return node.children.forEach((c) => collectLabels(c, into));
    case 'parallel':
      into.set(node.label, node);
      return node.branches.forEach((c) => collectLabels(c, into));
    case 'loop':
      into.set(node.label, node);
      return collectLabels(node.body, into);
    case 'branch':
      into.set(node.label, node);
      return [...node.cases.values()].forEach((c) => collectLabels(c, into));
    case 'forEach':
      into.set(node.label, node);
      if (node.body) collectLabels(node.body, into);
  }
}

/** The plan's nodes of a scope, flattened out of sequences. */
function planEntries(node: FlowNode | null): FlowNode[] {
  if (node === null) return [];
  return node.kind === 'sequence' ? node.children.flatMap(planEntries) : [node];
}

/** A scope's nodes: in the plan's order with what has not run as pending, then anything the plan does not name. */
function convertScope(scope: ScopeBuild, planNode: FlowNode | null, prefix: string, ctx: Convert): TreeNode[] {
  const out: TreeNode[] = [];
  const used = new Set<string>();
  for (const node of planEntries(planNode)) {
    if (node.kind === 'agent') {
      for (const step of node.agent.steps) {
        const name = `${node.agent.id}/${step.name}`;
        const entry = scope.entries.get(`s:${name}`);
        used.add(`s:${name}`);
        out.push(entry?.step ?? { kind: 'step', path: `${prefix}${name}`, step: name, status: 'pending', sequence: null, durationMs: null, attempt: null, error: null });
      }
    } else if (node.kind !== 'sequence') {
      used.add(`c:${node.label}`);
      const built = scope.entries.get(`c:${node.label}`)?.construct ?? { label: node.label, path: `${prefix}${node.label}`, parts: new Map(), untils: new Map(), decision: null };
      out.push(convertConstruct(built, node, prefix, ctx));
    }
  }
  const rest = [...scope.entries.entries()].filter(([key]) => !used.has(key)).sort((a, b) => a[1].order - b[1].order);
  for (const [, entry] of rest) out.push(entry.step ?? convertConstruct(entry.construct!, ctx.labels.get(entry.construct!.label) ?? null, prefix, ctx));
  return out;
}

function kindOf(built: ConstructBuild, planNode: FlowNode | null): TreeConstruct['kind'] {
  if (planNode && planNode.kind !== 'agent' && planNode.kind !== 'sequence') return planNode.kind;
  if (built.untils.size > 0) return 'loop';
  if (built.decision && Array.isArray(built.decision.value)) return 'forEach';
  if (built.decision && typeof built.decision.value === 'string') return 'branch';
  const base = built.label.replace(/#\d+'*$/, '');
  if (base.startsWith('forEach(')) return 'forEach';
  if (base === 'loop' || base === 'branch' || base === 'parallel') return base;
  return 'group';
}

function convertConstruct(built: ConstructBuild, planNode: FlowNode | null, prefix: string, ctx: Convert): TreeConstruct {
  const kind = kindOf(built, planNode);
  const partPrefix = (key: string) => `${prefix}${built.label}[${key}]/`;
  const sortedKeys = [...built.parts.keys()].sort((a, b) => (isIndex(a) && isIndex(b) ? Number(a) - Number(b) : built.parts.get(a)!.order - built.parts.get(b)!.order));
  const part = (key: string, body: FlowNode | null): TreePart => {
    const children = convertScope(built.parts.get(key)?.scope ?? { entries: new Map() }, body, partPrefix(key), ctx);
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
    forEachParts(node, built, planNode?.kind === 'forEach' ? planNode : null, sortedKeys, part, ctx);
  } else {
    node.parts = sortedKeys.map((key) => part(key, null));
  }
  node.status = constructStatus(node);
  return node;
}

function forEachParts(
  node: TreeConstruct,
  built: ConstructBuild,
  planNode: Extract<FlowNode, { kind: 'forEach' }> | null,
  keys: string[],
  part: (key: string, body: FlowNode | null) => TreePart,
  ctx: Convert,
): void {
  const items = built.decision && Array.isArray(built.decision.value) ? built.decision.value : null;
  node.itemCount = items ? items.length : null;
  const indexes = [...new Set([...(items ? items.map((_, i) => String(i)) : []), ...keys])].sort((a, b) => Number(a) - Number(b));
  const into = planNode?.into ?? /^forEach\((.*)\)/.exec(built.label)?.[1] ?? null;
  const childIds = into === null ? [] : indexes.map((i) => `${ctx.run.runId}/${into}/${i}`);
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

function decisionValue(output: string): unknown {
  try {
    return (JSON.parse(output) as { value?: unknown } | null)?.value;
  } catch {
    return undefined;
  }
}
