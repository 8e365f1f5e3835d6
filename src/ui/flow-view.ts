import { rowPath, SYSTEM_AGENT } from '../core/row-integrity';
import type { FlowNode } from '../core/flow-plan';
import type { PipelinePlan } from '../core/plan-reader';
import type { RunRecord, StepRecord } from '../storage/checkpoint-store';
import type { ChildRunView, FlowNodeView, FlowView, ForEachItemView, ForEachView, ItemStatus, ScopeView, Span } from './api-types';

// The tree's types are in api-types.ts, which the page reads too.
export type {
  BranchView,
  ChildRunView,
  FlowNodeView,
  FlowStepNodeView,
  FlowView,
  ForEachItemView,
  ForEachView,
  GroupView,
  ItemStatus,
  LoopView,
  ParallelView,
  ScopeView,
} from './api-types';

type Kind = 'parallel' | 'loop' | 'branch' | 'forEach' | 'group';

interface Scope {
  key: string;
  path: string;
  entries: Entry[];
  constructs: Map<string, Construct>;
}

type Entry = { row: StepRecord } | { failed: string } | { construct: Construct };

interface Construct {
  label: string;
  path: string;
  scopes: Map<string, Scope>;
  decision: unknown;
  until: Map<string, boolean>;
}

/** True when the run's rows (or its registered plan) are a control-flow tree rather than a straight line. */
export function isFlowRun(steps: readonly StepRecord[], plan: PipelinePlan | undefined): boolean {
  return plan?.flow !== undefined || steps.some((s) => (s.path ?? null) !== null || s.status === 'skipped' || (s.agentId === SYSTEM_AGENT && s.stepName === 'decision'));
}

/** `forEach(reviews)[17]` -> label and key; null for an agent id or step name. */
function scopeSegment(segment: string): { label: string; key: string } | null {
  const m = /^(.+)\[([^\]]*)\]$/.exec(segment);
  return m ? { label: m[1], key: m[2] } : null;
}

function newScope(key: string, path: string): Scope {
  return { key, path, entries: [], constructs: new Map() };
}

function constructIn(scope: Scope, label: string): Construct {
  let c = scope.constructs.get(label);
  if (!c) {
    c = { label, path: scope.path ? `${scope.path}/${label}` : label, scopes: new Map(), decision: undefined, until: new Map() };
    scope.constructs.set(label, c);
    scope.entries.push({ construct: c });
  }
  return c;
}

/** Descends `segments` (each `label[key]`) from the root, creating what is missing; null when a segment is not a scope. */
function descend(root: Scope, segments: readonly string[]): Scope | null {
  let scope = root;
  for (const segment of segments) {
    const parsed = scopeSegment(segment);
    if (!parsed) return null;
    const c = constructIn(scope, parsed.label);
    let next = c.scopes.get(parsed.key);
    if (!next) {
      next = newScope(parsed.key, `${c.path}[${parsed.key}]`);
      c.scopes.set(parsed.key, next);
    }
    scope = next;
  }
  return scope;
}

function valueOf(row: StepRecord): unknown {
  try {
    return (JSON.parse(row.output) as { value?: unknown }).value;
  } catch {
    return undefined;
  }
}

/** Kinds and forEach targets by label, from the registered plan's tree. */
function planLabels(node: FlowNode | undefined, out: Map<string, PlanLabel>): void {
  if (!node) return;
  switch (node.kind) {
    case 'agent':
      return;
    case 'sequence':
      node.children.forEach((c) => planLabels(c, out));
      return;
    case 'parallel':
      out.set(node.label, { kind: 'parallel' });
      node.branches.forEach((c) => planLabels(c, out));
      return;
    case 'loop':
      out.set(node.label, { kind: 'loop' });
      planLabels(node.body, out);
      return;
    case 'branch':
      out.set(node.label, { kind: 'branch' });
      node.cases.forEach((c) => planLabels(c, out));
      return;
    case 'forEach':
      out.set(node.label, { kind: 'forEach', into: node.into, child: node.child !== null, distributed: node.distributed !== null });
      if (node.body) planLabels(node.body, out);
      return;
  }
}

function kindOf(c: Construct, fromPlan: { kind: Kind } | undefined): Kind {
  if (fromPlan) return fromPlan.kind;
  if (c.until.size > 0) return 'loop';
  if (Array.isArray(c.decision)) return 'forEach';
  if (typeof c.decision === 'string') return 'branch';
  const name = c.label.replace(/#\d+$/, '');
  if (name === 'parallel' || name === 'loop' || name === 'branch') return name;
  if (name.startsWith('forEach(')) return 'forEach';
  return 'group';
}

function byKey(a: Scope, b: Scope): number {
  const na = Number(a.key);
  const nb = Number(b.key);
  return Number.isInteger(na) && Number.isInteger(nb) ? na - nb : 0;
}

/** Statuses of the rows under a scope, nested scopes included. */
function rowsUnder(scope: Scope, out: StepRecord[] = []): StepRecord[] {
  for (const e of scope.entries) {
    if ('row' in e) out.push(e.row);
    else if ('construct' in e) for (const s of e.construct.scopes.values()) rowsUnder(s, out);
  }
  return out;
}

function hasFailed(scope: Scope): boolean {
  return scope.entries.some((e) => 'failed' in e || ('construct' in e && [...e.construct.scopes.values()].some(hasFailed)));
}

function spanOf(rows: readonly StepRecord[]): Span {
  if (rows.length === 0) return { startedAt: null, completedAt: null };
  let from = rows[0].startedAt.getTime();
  let to = rows[0].completedAt.getTime();
  for (const r of rows) {
    from = Math.min(from, r.startedAt.getTime());
    to = Math.max(to, r.completedAt.getTime());
  }
  return { startedAt: new Date(from).toISOString(), completedAt: new Date(to).toISOString() };
}

function childView(run: RunRecord): ChildRunView {
  return { runId: run.runId, pipeline: run.pipelineName, status: run.status, updatedAt: run.updatedAt.toISOString() };
}

/**
 * The control-flow tree of a run: parallel lanes, loop iterations with their stop/continue decisions,
 * the branch case chosen, forEach items with counts by status (and their child runs).
 *
 * @example
 * const flow = flowView(loaded.run, loaded.steps, plan, await store.listRuns({ parentRunId: runId }));
 */
export function flowView(
  run: RunRecord,
  steps: readonly StepRecord[],
  plan: PipelinePlan | undefined,
  children: readonly RunRecord[],
  failedPaths: readonly string[] = [],
): FlowView {
  const root = scopeTree(steps, failedPaths);
  const labels = new Map<string, PlanLabel>();
  planLabels(plan?.flow, labels);
  const claimed = new Set<string>();

  const scopeView = (scope: Scope): ScopeView => ({ key: scope.key, path: scope.path, children: nodes(scope), ...spanOf(rowsUnder(scope)) });
  const nodes = (scope: Scope): FlowNodeView[] =>
    scope.entries.map((e): FlowNodeView => {
      if ('row' in e) return { kind: 'step', path: rowPath(e.row), sequence: e.row.sequence, status: e.row.status };
      if ('failed' in e) return { kind: 'step', path: e.failed, sequence: null, status: 'failed' };
      const c = e.construct;
      const scopes = [...c.scopes.values()].sort(byKey);
      const span = spanOf(scopes.flatMap((s) => rowsUnder(s)));
      const fromPlan = labels.get(c.label);
      const kind = kindOf(c, fromPlan);
      if (kind === 'parallel') return { kind, label: c.label, path: c.path, lanes: scopes.map(scopeView), ...span };
      if (kind === 'loop') {
        return {
          kind,
          label: c.label,
          path: c.path,
          iterations: scopes.map((s) => ({ ...scopeView(s), decision: c.until.has(s.key) ? (c.until.get(s.key) ? 'stop' : 'continue') : null })),
          ...span,
        };
      }
      if (kind === 'branch') return { kind, label: c.label, path: c.path, chosen: typeof c.decision === 'string' ? c.decision : null, cases: scopes.map(scopeView), ...span };
      if (kind === 'group') return { kind, label: c.label, path: c.path, scopes: scopes.map(scopeView), ...span };
      // forEach: items from rows, or from child runs `<runId>/<into>/<index>` for a forEach over a @Pipeline.
      const into = fromPlan?.into ?? /^forEach\((.*)\)$/.exec(c.label.replace(/#\d+$/, ''))?.[1];
      const prefix = into === undefined ? null : `${c.path.replace(/[^/]+$/, '')}`.replace(/\/$/, '');
      const childPrefix = into === undefined ? null : `${run.runId}/${prefix ? prefix + '/' : ''}${into}/`;
      const mine = childPrefix === null ? [] : children.filter((ch) => ch.runId.startsWith(childPrefix) && /^\d+$/.test(ch.runId.slice(childPrefix.length)));
      mine.forEach((ch) => claimed.add(ch.runId));
      // A distributed agent or sequence body has child runs only when it ran on a fleet (in process, its items are rows here).
      const childRuns = fromPlan?.distributed && mine.length > 0 ? true : (fromPlan?.child ?? (mine.length > 0 && scopes.length === 0));
      const expected = childRuns ? null : expectedSteps(plan, c.path);
      const items = childRuns
        ? childRunItems(c.path, mine, childPrefix!)
        : scopes.map((s): ForEachItemView => ({ ...scopeView(s), status: rowItemStatus(s, expected), child: null }));
      const total = Array.isArray(c.decision) ? c.decision.length : null;
      const counts: ForEachView['counts'] = { completed: 0, skipped: 0, started: 0, queued: 0, failed: 0, notRecorded: 0 };
      items.forEach((i) => (counts[i.status] += 1));
      counts.notRecorded = total === null ? 0 : Math.max(0, total - items.length);
      return { kind: 'forEach', label: c.label, path: c.path, total, childRuns, counts, items, ...span };
    });

  const tree = nodes(root);
  return { root: tree, otherChildren: children.filter((ch) => !claimed.has(ch.runId)).map(childView) };
}

/** What the plan says of a construct, by its label (see `planLabels`). */
type PlanLabel = { kind: Kind; into?: string; child?: boolean; distributed?: boolean };

/**
 * The run's rows placed in the scopes their paths name: a step under the construct scope that holds it,
 * decisions on their constructs (an `#until` decision on its loop iteration), failed steps (no row) as entries.
 */
function scopeTree(steps: readonly StepRecord[], failedPaths: readonly string[]): Scope {
  const root = newScope('', '');
  for (const row of steps) {
    if (row.agentId === SYSTEM_AGENT) {
      if (row.stepName !== 'decision' || !row.path || row.path.endsWith('#when')) continue;
      const until = /^(.*)\[([^\]]*)\]#until$/.exec(row.path);
      const path = until ? until[1] : row.path;
      const segments = path.split('/');
      const scope = descend(root, segments.slice(0, -1));
      if (!scope) continue;
      const c = constructIn(scope, segments[segments.length - 1]);
      if (until) c.until.set(until[2], valueOf(row) === true);
      else c.decision = valueOf(row);
      continue;
    }
    const segments = rowPath(row).split('/');
    const scope = descend(root, segments.slice(0, -2));
    (scope ?? root).entries.push({ row });
  }
  for (const path of failedPaths) {
    const segments = path.split('/');
    const scope = descend(root, segments.slice(0, -2));
    (scope ?? root).entries.push({ failed: path });
  }
  return root;
}

/** The items of a forEach over child runs, in item order; a child queued and never taken counts as queued. */
function childRunItems(path: string, mine: readonly RunRecord[], childPrefix: string): ForEachItemView[] {
  const index = (ch: RunRecord) => Number(ch.runId.slice(childPrefix.length));
  return [...mine]
    .sort((a, b) => index(a) - index(b))
    .map((ch) => {
      const key = ch.runId.slice(childPrefix.length);
      const status: ItemStatus =
        ch.status === 'completed'
          ? 'completed'
          : ch.status === 'failed' || ch.status === 'cancelled'
            ? 'failed'
            : ch.status === 'paused' && ch.leaseEpoch === 0 && ch.lastSequence === 0
              ? 'queued'
              : 'started';
      return { key, path: `${path}[${key}]`, children: [], startedAt: ch.createdAt.toISOString(), completedAt: ch.updatedAt.toISOString(), status, child: childView(ch) };
    });
}

/** An in-process item's status from its rows: failed, all skipped, fewer rows than an item records (started), or completed. */
function rowItemStatus(scope: Scope, expected: number | null): ItemStatus {
  const rows = rowsUnder(scope);
  if (hasFailed(scope) || rows.some((r) => r.status === 'failed')) return 'failed';
  if (rows.length > 0 && rows.every((r) => r.status === 'skipped')) return 'skipped';
  return expected !== null && rows.length < expected ? 'started' : 'completed';
}

/**
 * Steps one item of the forEach at `path` records, from the plan's step templates
 * (`forEach(reviews)[*]/FileReviewer/review`); null when unknown or variable (a nested construct).
 */
function expectedSteps(plan: PipelinePlan | undefined, path: string): number | null {
  if (!plan?.flow) return null;
  const template = path.replace(/\[[^\]]*\]/g, '[*]') + '[*]/';
  const keys = plan.steps.map((s) => s.key).filter((k) => k.startsWith(template));
  if (keys.length === 0 || keys.some((k) => k.slice(template.length).includes('['))) return null;
  return keys.length;
}
