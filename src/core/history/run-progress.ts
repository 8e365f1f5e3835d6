import type { RunRecord, StepRecord } from '../../contract/records';
import { scopesFromRows, type RowConstruct, type RowScope } from './flow-scopes';
import type { FlowNode, PipelinePlan } from '../plan/plan-types';
import { SYSTEM_AGENT } from './row-integrity';
import { expandPaths, PathSet, type PathEntry } from './path-runs';
import { rootEntries } from './flow-base';

/**
 * How far a run has come, the one definition every view shows (`RunInfo.progress`, `runs show`,
 * `runs list`, `runs resume`, the page and its list).
 *
 * - `recorded`: the pipeline's steps that have a row (completed, or skipped by a `when`). Decisions, joins
 *   and other `$waypoint` rows are not steps and are not counted.
 * - `planned`: the steps known so far. With the run's plan: the plan's tree as far as the recorded
 *   decisions make it known — every iteration of a loop recorded so far plus the next one when the last
 *   check said continue (the first one before any), a forEach's items once its item list is recorded, a
 *   branch's chosen case. Without the plan (the rows are the truth): `recorded` once the run is completed,
 *   else null. `recorded` never exceeds `planned`, and the two meet when the run completes.
 * - `items`: the items of the run's forEach constructs, summed, once an item list is recorded: `done` are the
 *   items whose steps all have rows (or whose child run completed), `total` the items listed.
 */
export interface RunProgress {
  recorded: number;
  planned: number | null;
  items?: { done: number; total: number };
}

/** A child run as far as progress needs it. */
export type ChildProgress = Pick<RunRecord, 'runId' | 'status'>;

/**
 * The progress of a run from its rows (in sequence order), its plan when known, and its child runs
 * (`listRuns({ parentRunId })`, for forEach items over a @Pipeline).
 *
 * @example
 * const loaded = await store.loadRun('q3-aapl');
 * runProgress(loaded.run, loaded.steps, plan); // { recorded: 10, planned: 12, items: { done: 3, total: 4 } }
 */
export function runProgress(run: Pick<RunRecord, 'runId' | 'status'>, steps: readonly StepRecord[], plan?: PipelinePlan, children: readonly ChildProgress[] = []): RunProgress {
  const recorded = countRecorded(steps);
  const items = { done: 0, total: 0, seen: false };
  let planned: number | null = null;
  if (plan && !plan.linear) {
    const folded = foldedIn(steps);
    planned = plannedIn(plan.flow, scopesFromRows(steps), { run, children, items, prefix: '', folded, rootEntries: rootEntries(plan) });
    if (folded.items) addItems(items, folded.items);
  } else if (plan) planned = plan.steps.length;
  else itemsFromRows(scopesFromRows(steps), items, run, children);
  if (run.status === 'completed') planned = planned === null ? recorded : Math.max(planned, recorded);
  // A plan that no longer fits the rows (an unregistered change) must not show 12/10.
  if (planned !== null && planned < recorded) planned = recorded;
  const progress: RunProgress = { recorded, planned };
  if (items.seen) progress.items = { done: items.done, total: items.total };
  return progress;
}

/**
 * True when the plan has a `forEach` anywhere (its item counts are in decisions a resume snapshot folds);
 * with `overPipelines`, only one whose items are child runs (a @Pipeline body: counting them lists the children).
 */
export function hasForEach(node: FlowNode, overPipelines = false): boolean {
  const any = (nodes: Iterable<FlowNode>) => [...nodes].some((child) => hasForEach(child, overPipelines));
  switch (node.kind) {
    case 'agent':
      return false;
    case 'sequence':
      return any(node.children);
    case 'parallel':
      return any(node.branches);
    case 'loop':
      return any([node.body]);
    case 'branch':
      return any(node.cases.values());
    case 'forEach':
      return !overPipelines || !node.body || any([node.body]);
  }
}

/** The progress of a straight-line run from its run record: the cursor's position among the plan's steps. */
export function straightLineProgress(run: Pick<RunRecord, 'status' | 'cursorAgent' | 'cursorStep'>, plan: PipelinePlan): RunProgress {
  const planned = plan.steps.length;
  if (run.status === 'completed' || run.cursorAgent >= plan.agents.length) return { recorded: planned, planned };
  const position = plan.steps.findIndex((s) => s.agentIndex === run.cursorAgent && s.stepIndex === run.cursorStep);
  return { recorded: Math.max(0, position), planned };
}

/** Step rows, plus the steps a retention base snapshot folded (its `completed` list, when readable). */
function countRecorded(steps: readonly StepRecord[]): number {
  let n = 0;
  for (const row of steps) {
    if (row.agentId !== SYSTEM_AGENT) {
      if (row.status === 'completed' || row.status === 'skipped') n += 1;
    } else if (row.stepName === 'base') n += foldedCount(row.output);
  }
  return n;
}

function foldedCount(output: string): number {
  return foldedOf(output).completed.size;
}

/**
 * What a base row (retention's fold, a resume snapshot) folded: step paths (a snapshot's in runs), the
 * top-level parts of a tree it holds whole, and the iterations it folded of the top-level loop after them.
 */
interface Folded {
  completed: PathSet;
  done: Set<string>;
  /** Top-level entry index and count of the loop iterations folded (`flow.done` / `flow.iterations`). */
  iterations?: { at: number; count: number };
  /**
   * The forEach items of the rows it folded (`SnapshotItems`): null when none (no base row, a retention base,
   * whose items are not counted, or a snapshot that folded no item list); undefined when not known (a resume
   * snapshot written before snapshots carried them, or an encrypted base).
   */
  items?: SnapshotItems | null;
}

/** A resume snapshot's `items`: the forEach items of the rows it folded, as `RunProgress.items` counted them. */
export interface SnapshotItems {
  done: number;
  total: number;
}

const NOTHING_FOLDED: Folded = { completed: new PathSet(), done: new Set() };

function foldedOf(output: string): Folded {
  try {
    const base = JSON.parse(output) as {
      completed?: unknown;
      completedRuns?: unknown;
      items?: unknown;
      flow?: { doneKeys?: unknown; doneKeyRuns?: unknown; done?: unknown; iterations?: unknown };
    } | null;
    const completed = Array.isArray(base?.completed) ? base.completed.filter((p): p is string => typeof p === 'string') : [];
    const runs = Array.isArray(base?.completedRuns) ? (base.completedRuns as PathEntry[]) : [];
    const keyRuns = Array.isArray(base?.flow?.doneKeyRuns) ? expandPaths(base.flow.doneKeyRuns as PathEntry[]) : [];
    const done = [...(Array.isArray(base?.flow?.doneKeys) ? base.flow.doneKeys.filter((k): k is string => typeof k === 'string') : []), ...keyRuns];
    const { done: at, iterations: count } = base?.flow ?? {};
    const folded: Folded = { completed: new PathSet([...completed, ...runs]), done: new Set(done), items: null };
    // Only a resume snapshot (it has `completedRuns`) counts its folded loop iterations and items: a retention base
    // row is counted as it always was (the stores of release 0.1 show the progress they showed).
    if (Array.isArray(base?.completedRuns)) {
      if (typeof at === 'number' && typeof count === 'number' && count > 0) folded.iterations = { at, count };
      folded.items = base.items === null ? null : itemsOf(base.items);
    }
    return folded;
  } catch {
    return NOTHING_FOLDED; // an encrypted base: its folded steps cannot be counted without the key
  }
}

function itemsOf(value: unknown): SnapshotItems | undefined {
  const { done, total } = (value ?? {}) as Partial<Record<keyof SnapshotItems, unknown>>;
  return typeof done === 'number' && typeof total === 'number' ? { done, total } : undefined;
}

/** What each base row read folded: a view asks twice of one row (`itemsCountable`, then `runProgress`), and a base row holds the whole state. */
const foldedRows = new WeakMap<StepRecord, Folded>();

const NO_BASE: Folded = { ...NOTHING_FOLDED, items: null };

function foldedIn(steps: readonly StepRecord[]): Folded {
  const base = steps.find((row) => row.agentId === SYSTEM_AGENT && row.stepName === 'base');
  if (!base) return NO_BASE;
  let folded = foldedRows.get(base);
  if (!folded) foldedRows.set(base, (folded = foldedOf(base.output)));
  return folded;
}

function addItems(items: Walk['items'], more: SnapshotItems): void {
  items.seen = true;
  items.done += more.done;
  items.total += more.total;
}

/**
 * What a resume snapshot taken over `rows` (the previous base row, if any, and the rows the new one folds)
 * carries as `items`, so that progress counted from it equals progress counted from every row: the items
 * of the previous base plus those the rows after it record. Null when no item list is among them; undefined
 * when the previous snapshot did not carry its own (the new one must not either: its readers read every row).
 *
 * @example
 * const items = snapshotItems(run, found.folded, plan, await store.listRuns({ parentRunId: run.runId }));
 */
export function snapshotItems(
  run: Pick<RunRecord, 'runId' | 'status'>,
  rows: readonly StepRecord[],
  plan: PipelinePlan,
  children: readonly ChildProgress[],
): SnapshotItems | null | undefined {
  if (foldedIn(rows).items === undefined) return undefined;
  return runProgress(run, rows, plan, children).items ?? null;
}

/** True when a tree run read from `steps` (a resume snapshot and its tail) counts its items as every row does. */
export function itemsCountable(steps: readonly StepRecord[]): boolean {
  return foldedIn(steps).items !== undefined;
}

interface Walk {
  run: Pick<RunRecord, 'runId' | 'status'>;
  children: readonly ChildProgress[];
  items: { done: number; total: number; seen: boolean };
  /** The path of the scope being walked, with a trailing slash ('' at the top). */
  prefix: string;
  /** What retention folded into a base row: a top-level construct it holds whole has no rows left to walk. */
  folded: Folded;
  /** The plan's top-level entries (what `folded.iterations.at` indexes). */
  rootEntries: readonly FlowNode[];
}

function constructIn(scope: RowScope | undefined, label: string): RowConstruct | undefined {
  const entry = scope?.entries.get(`c:${label}`);
  return entry?.kind === 'construct' ? entry.construct : undefined;
}

function partScope(c: RowConstruct | undefined, key: string): RowScope | undefined {
  return c?.parts.get(key)?.scope;
}

/** Steps of `node` known so far, in `scope` (the rows of the enclosing part; undefined when none). */
function plannedIn(node: FlowNode, scope: RowScope | undefined, w: Walk): number {
  if (w.prefix === '' && node.kind !== 'agent' && node.kind !== 'sequence' && w.folded.done.has(node.label)) {
    return w.folded.completed.countStartingWith(`${node.label}[`);
  }
  switch (node.kind) {
    case 'agent':
      return node.agent.steps.length;
    case 'sequence':
      return node.children.reduce((sum, child) => sum + plannedIn(child, scope, w), 0);
    case 'parallel': {
      const c = constructIn(scope, node.label);
      return node.branches.reduce((sum, b, i) => sum + plannedIn(b, partScope(c, String(i)), inPart(w, node.label, String(i))), 0);
    }
    case 'loop':
      return plannedLoop(node, constructIn(scope, node.label), w, w.prefix === '' ? foldedIterations(node, w) : 0);
    case 'branch': {
      const c = constructIn(scope, node.label);
      const chosen = c?.decision?.value;
      const body = typeof chosen === 'string' ? node.cases.get(chosen) : undefined;
      // Before its decision a branch's steps are not known: none are counted yet.
      return body ? plannedIn(body, partScope(c, chosen as string), inPart(w, node.label, chosen as string)) : 0;
    }
    case 'forEach':
      return plannedForEach(node, constructIn(scope, node.label), w);
  }
}

function inPart(w: Walk, label: string, key: string): Walk {
  return { ...w, prefix: `${w.prefix}${label}[${key}]/` };
}

/**
 * `folded`: iterations a base row folded (their steps are in its `completed`, with no rows): the first
 * `folded` iterations, each ended by a check that said continue (else the loop would be folded whole).
 */
function plannedLoop(node: Extract<FlowNode, { kind: 'loop' }>, c: RowConstruct | undefined, w: Walk, folded: number): number {
  const keys = [...(c?.parts.keys() ?? [])].sort((a, b) => Number(a) - Number(b));
  let sum = keys.reduce((acc, key) => acc + plannedIn(node.body, partScope(c, key), inPart(w, node.label, key)), 0);
  if (folded > 0) sum += w.folded.completed.countStartingWith(`${node.label}[`);
  const last = keys[keys.length - 1];
  // The iteration to come is known when none ran yet (a loop runs its body at least once) or the last check said continue.
  const next = last === undefined ? String(folded) : c?.untils.get(last) === false ? String(Number(last) + 1) : null;
  if (next !== null && folded + keys.length < node.maxIterations) sum += plannedIn(node.body, undefined, inPart(w, node.label, next));
  return sum;
}

/** Iterations of top-level loop `node` a base row folded (0 when it folded none of this loop). */
function foldedIterations(node: FlowNode, w: Walk): number {
  const at = w.folded.iterations;
  return at && w.rootEntries[at.at] === node ? at.count : 0;
}

function plannedForEach(node: Extract<FlowNode, { kind: 'forEach' }>, c: RowConstruct | undefined, w: Walk): number {
  const list = c?.decision?.value;
  if (!Array.isArray(list)) return 0;
  w.items.seen = true;
  w.items.total += list.length;
  if (!node.body) {
    // Each item is a child run `<runId>/<scope path><into>/<index>`: its steps are the child's, not this run's.
    w.items.done += completedChildren(w, `${w.run.runId}/${w.prefix}${node.into}/`, list.length);
    return 0;
  }
  let sum = 0;
  for (let i = 0; i < list.length; i += 1) {
    const part = partScope(c, String(i));
    const own = plannedIn(node.body, part, inPart(w, node.label, String(i)));
    if (part && recordedUnder(part) >= own) w.items.done += 1;
    sum += own;
  }
  return sum;
}

function completedChildren(w: Walk, prefix: string, total: number): number {
  const done = w.children.filter((ch) => ch.status === 'completed' && ch.runId.startsWith(prefix) && /^\d+$/.test(ch.runId.slice(prefix.length))).length;
  return Math.min(done, total);
}

function recordedUnder(scope: RowScope): number {
  let n = 0;
  for (const e of scope.entries.values()) {
    if (e.kind === 'row') n += e.row.status === 'completed' || e.row.status === 'skipped' ? 1 : 0;
    else if (e.kind === 'construct') for (const part of e.construct.parts.values()) n += recordedUnder(part.scope);
  }
  return n;
}

/**
 * Without a plan: each recorded item list counts. An item is done when its child run completed, or when the
 * run completed, or (the items of one forEach run the same body) when it has recorded as many steps as the
 * fullest item of its forEach and none failed.
 */
function itemsFromRows(scope: RowScope, items: Walk['items'], run: Walk['run'], children: readonly ChildProgress[]): void {
  for (const e of scope.entries.values()) {
    if (e.kind !== 'construct') continue;
    const c = e.construct;
    const list = c.decision?.value;
    if (Array.isArray(list)) {
      items.seen = true;
      items.total += list.length;
      const into = /^forEach\((.*)\)$/.exec(c.label.replace(/#\d+'*$/, ''))?.[1] ?? c.label;
      const prefix = `${run.runId}/${c.path.slice(0, c.path.length - c.label.length)}${into}/`;
      const viaChildren = completedChildren({ run, children, items, prefix: '', folded: NOTHING_FOLDED, rootEntries: [] }, prefix, list.length);
      const counts = [...c.parts.values()].filter((p) => !failedUnder(p.scope)).map((p) => recordedUnder(p.scope));
      const fullest = Math.max(0, ...counts);
      const viaRows = fullest === 0 ? 0 : counts.filter((n) => n === fullest).length;
      items.done += run.status === 'completed' ? list.length : Math.min(list.length, viaChildren + viaRows);
    }
    for (const part of c.parts.values()) itemsFromRows(part.scope, items, run, children);
  }
}

function failedUnder(scope: RowScope): boolean {
  for (const e of scope.entries.values()) {
    if (e.kind === 'failed' || (e.kind === 'row' && e.row.status === 'failed')) return true;
    if (e.kind === 'construct' && [...e.construct.parts.values()].some((p) => failedUnder(p.scope))) return true;
  }
  return false;
}
