import { constructsByLabel, kindFromRows, orderedEntries, scopesFromRows, type RowConstruct, type RowScope } from '../core/history/flow-scopes';
import { rowPath } from '../core/history/row-integrity';
import type { PipelinePlan } from '../core/plan/plan-reader';
import type { RunRecord, StepRecord } from '../contract/checkpoint-store';
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

function byKey(a: RowScope, b: RowScope): number {
  const na = Number(a.key);
  const nb = Number(b.key);
  return Number.isInteger(na) && Number.isInteger(nb) ? na - nb : 0;
}

/** The rows under a scope, nested scopes included. */
function rowsUnder(scope: RowScope, out: StepRecord[] = []): StepRecord[] {
  for (const e of scope.entries.values()) {
    if (e.kind === 'row') out.push(e.row);
    else if (e.kind === 'construct') for (const part of e.construct.parts.values()) rowsUnder(part.scope, out);
  }
  return out;
}

function hasFailed(scope: RowScope): boolean {
  return [...scope.entries.values()].some((e) => e.kind === 'failed' || (e.kind === 'construct' && [...e.construct.parts.values()].some((p) => hasFailed(p.scope))));
}

/** A construct's parts (lanes, iterations, cases, items), numeric keys in number order. */
function partsOf(c: RowConstruct): RowScope[] {
  return [...c.parts.values()].map((p) => p.scope).sort(byKey);
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
  maxParts = Number.POSITIVE_INFINITY,
): FlowView {
  const root = scopesFromRows(
    steps,
    failedPaths.map((path) => ({ path })),
  );
  const labels = constructsByLabel(plan?.flow);
  const claimed = new Set<string>();

  const scopeView = (scope: RowScope): ScopeView => ({ key: scope.key, path: scope.path, children: nodes(scope), ...spanOf(rowsUnder(scope)) });
  const nodes = (scope: RowScope): FlowNodeView[] =>
    orderedEntries(scope).map((e): FlowNodeView => {
      if (e.kind === 'row') return { kind: 'step', path: rowPath(e.row), sequence: e.row.sequence, status: e.row.status };
      if (e.kind === 'failed') return { kind: 'step', path: e.path, sequence: null, status: 'failed' };
      const c = e.construct;
      const scopes = partsOf(c);
      const span = spanOf(scopes.flatMap((s) => rowsUnder(s)));
      const node = labels.get(c.label);
      const fromPlan = node?.kind === 'forEach' ? node : undefined;
      const kind = node?.kind ?? kindFromRows(c);
      if (kind === 'parallel') return { kind, label: c.label, path: c.path, lanes: scopes.map(scopeView), ...span };
      if (kind === 'loop') {
        // A long loop sends its newest iterations: the run moves at the end.
        const hidden = Math.max(0, scopes.length - maxParts);
        return {
          kind,
          label: c.label,
          path: c.path,
          iterations: scopes.slice(hidden).map((s) => ({ ...scopeView(s), decision: c.untils.has(s.key) ? (c.untils.get(s.key) ? 'stop' : 'continue') : null })),
          hidden,
          ...span,
        };
      }
      const decision = c.decision?.value;
      if (kind === 'branch') return { kind, label: c.label, path: c.path, chosen: typeof decision === 'string' ? decision : null, cases: scopes.map(scopeView), ...span };
      if (kind === 'group') return { kind, label: c.label, path: c.path, scopes: scopes.map(scopeView), ...span };
      // forEach: items from rows, or from child runs `<runId>/<into>/<index>` for a forEach over a @Pipeline.
      const into = fromPlan?.into ?? /^forEach\((.*)\)$/.exec(c.label.replace(/#\d+$/, ''))?.[1];
      const prefix = into === undefined ? null : `${c.path.replace(/[^/]+$/, '')}`.replace(/\/$/, '');
      const childPrefix = into === undefined ? null : `${run.runId}/${prefix ? prefix + '/' : ''}${into}/`;
      const mine = childPrefix === null ? [] : children.filter((ch) => ch.runId.startsWith(childPrefix) && /^\d+$/.test(ch.runId.slice(childPrefix.length)));
      mine.forEach((ch) => claimed.add(ch.runId));
      // A distributed agent or sequence body has child runs only when it ran on a fleet (in process, its items are rows here).
      const childRuns = fromPlan ? fromPlan.child !== null || (fromPlan.distributed !== null && mine.length > 0) : mine.length > 0 && scopes.length === 0;
      const expected = childRuns ? null : expectedSteps(plan, c.path);
      // Counts cover every item; the first `maxParts` items in item order are sent.
      const runItems = childRuns ? childRunItems(c.path, mine, childPrefix!) : null;
      const statuses = runItems ? runItems.map((i) => i.status) : scopes.map((s) => rowItemStatus(s, expected));
      const items = runItems ? runItems.slice(0, maxParts) : scopes.slice(0, maxParts).map((s, i): ForEachItemView => ({ ...scopeView(s), status: statuses[i], child: null }));
      const total = Array.isArray(decision) ? decision.length : null;
      const counts: ForEachView['counts'] = { completed: 0, skipped: 0, started: 0, queued: 0, failed: 0, notRecorded: 0 };
      statuses.forEach((status) => (counts[status] += 1));
      counts.notRecorded = total === null ? 0 : Math.max(0, total - statuses.length);
      return { kind: 'forEach', label: c.label, path: c.path, total, childRuns, counts, items, hidden: statuses.length - items.length, ...span };
    });

  const tree = nodes(root);
  return { root: tree, otherChildren: children.filter((ch) => !claimed.has(ch.runId)).map(childView) };
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
function rowItemStatus(scope: RowScope, expected: number | null): ItemStatus {
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
  if (!plan || plan.linear) return null;
  const template = path.replace(/\[[^\]]*\]/g, '[*]') + '[*]/';
  const keys = plan.steps.map((s) => s.key).filter((k) => k.startsWith(template));
  if (keys.length === 0 || keys.some((k) => k.slice(template.length).includes('['))) return null;
  return keys.length;
}
