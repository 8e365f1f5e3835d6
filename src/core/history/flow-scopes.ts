import type { StepRecord } from '../../contract/checkpoint-store';
import type { FlowNode } from '../plan/flow-plan';
import { rowPath, SYSTEM_AGENT } from './row-integrity';

/*
 * A control-flow run's rows placed in the scopes their paths name, for the views that draw the run
 * (the CLI's `runs show` tree, the timeline page's flow tree): each view turns this into its own shape.
 * A path is scope segments (`parallel[1]`, `loop[2]`, `branch[high]`, `forEach(reviews)[17]`), then
 * `agentId/stepName`; a `$waypoint/decision` row sits on its construct (`<construct path>`, or
 * `<loop path>[<iteration>]#until` for a loop's check). `#when` decisions (a skipped step's reason) are
 * not drawn.
 */

/** A scope: the root, or one part of a construct (a branch lane, an iteration, a case, an item). */
export interface RowScope {
  /** The part's key in brackets ('' for the root). */
  key: string;
  /** The part's path (`parallel[1]`, '' for the root). */
  path: string;
  /** By `s:<agentId/stepName>` (a row or a failed step) or `c:<label>` (a construct). */
  entries: Map<string, ScopeEntry>;
}

/** What a scope holds, with the sequence it first appears at (failed steps, which have no row, come last). */
export type ScopeEntry = { order: number } & (
  { kind: 'row'; row: StepRecord } | { kind: 'failed'; path: string; step: string; failure: FailedStep } | { kind: 'construct'; construct: RowConstruct }
);

/** A construct seen in the rows: its parts by key, and its recorded decisions. */
export interface RowConstruct {
  label: string;
  /** Scope path plus label (`forEach(files)[3]/loop`). */
  path: string;
  parts: Map<string, { order: number; scope: RowScope }>;
  /** A loop's checks by iteration: true = it stopped after that iteration. */
  untils: Map<string, boolean>;
  /** The construct's decision (a branch's case, a forEach's item list), or null when none is recorded. */
  decision: { value: unknown } | null;
}

/** A step that has no row but failed attempts (it failed, or is being retried), as the caller describes it. */
export interface FailedStep {
  /** The step's path. */
  path: string;
  /** The last failed attempt's number, when known. */
  attempt?: number;
  /** The last failed attempt's error, when known. */
  error?: string | null;
}

/**
 * Whether a run is a control-flow tree rather than a straight line: its registered plan has constructs,
 * or it has child runs, or a row has a path, was skipped by a `when`, or records a decision.
 */
export function isFlowRun(steps: readonly StepRecord[], children: readonly unknown[], plan: { linear: boolean } | undefined): boolean {
  return (
    (plan !== undefined && !plan.linear) ||
    children.length > 0 ||
    steps.some((s) => (s.path ?? null) !== null || s.status === 'skipped' || (s.agentId === SYSTEM_AGENT && s.stepName === 'decision'))
  );
}

const SEGMENT = /^(.*)\[([^\]]*)\]$/;
const UNTIL = /^(.*)\[([^\]]*)\]#until$/;

/**
 * The scope tree of a run's rows (in sequence order) and of its failed steps without a row.
 *
 * @example
 * const root = scopesFromRows(loaded.steps, [{ path: 'loop[2]/Fix/apply', attempt: 3 }]);
 * orderedEntries(root).map((e) => e.kind); // ['row', 'construct', ...]
 */
export function scopesFromRows(steps: readonly StepRecord[], failed: readonly FailedStep[] = []): RowScope {
  const root: RowScope = { key: '', path: '', entries: new Map() };
  for (const row of steps) {
    if (row.agentId === SYSTEM_AGENT) {
      if (row.stepName === 'decision' && row.path && !row.path.endsWith('#when')) addDecision(root, row);
      continue;
    }
    const path = rowPath(row);
    const segments = path.split('/');
    const scope = scopeOf(root, segments.slice(0, -2), row.sequence) ?? root;
    scope.entries.set(`s:${row.agentId}/${row.stepName}`, { order: row.sequence, kind: 'row', row });
  }
  for (const failure of failed) {
    const segments = failure.path.split('/');
    if (segments.length < 2) continue;
    const step = segments.slice(-2).join('/');
    const scope = scopeOf(root, segments.slice(0, -2), Number.MAX_SAFE_INTEGER) ?? root;
    scope.entries.set(`s:${step}`, { order: Number.MAX_SAFE_INTEGER, kind: 'failed', path: failure.path, step, failure });
  }
  return root;
}

/** A scope's entries in the order they first appear in the run. */
export function orderedEntries(scope: RowScope): ScopeEntry[] {
  return [...scope.entries.values()].sort((a, b) => a.order - b.order);
}

/** The value a decision row recorded (`{ value }` as JSON), or undefined when it cannot be read. */
export function decisionValue(output: string): unknown {
  try {
    return (JSON.parse(output) as { value?: unknown } | null)?.value;
  } catch {
    return undefined;
  }
}

function addDecision(root: RowScope, row: StepRecord): void {
  const until = UNTIL.exec(row.path!);
  const at = until ? until[1] : row.path!;
  const segments = at.split('/');
  const scope = scopeOf(root, segments.slice(0, -1), row.sequence);
  if (!scope) return;
  const construct = constructAt(scope, segments[segments.length - 1], row.sequence);
  const value = decisionValue(row.output);
  if (until) construct.untils.set(until[2], value === true);
  else construct.decision = { value };
}

function constructAt(scope: RowScope, label: string, order: number): RowConstruct {
  const key = `c:${label}`;
  let entry = scope.entries.get(key);
  if (!entry || entry.kind !== 'construct') {
    const construct: RowConstruct = { label, path: scope.path ? `${scope.path}/${label}` : label, parts: new Map(), untils: new Map(), decision: null };
    scope.entries.set(key, (entry = { order, kind: 'construct', construct }));
  }
  entry.order = Math.min(entry.order, order);
  return entry.construct;
}

/** The scope `segments` (`['loop[1]', ...]`) name, created on the way down; null when a segment is not a scope. */
function scopeOf(root: RowScope, segments: readonly string[], order: number): RowScope | null {
  let scope = root;
  for (const segment of segments) {
    const match = SEGMENT.exec(segment);
    if (!match) return null;
    const construct = constructAt(scope, match[1], order);
    let part = construct.parts.get(match[2]);
    if (!part) construct.parts.set(match[2], (part = { order, scope: { key: match[2], path: `${construct.path}[${match[2]}]`, entries: new Map() } }));
    part.order = Math.min(part.order, order);
    scope = part.scope;
  }
  return scope;
}

/** The kinds of construct a view draws. */
export type ConstructKind = 'parallel' | 'loop' | 'branch' | 'forEach' | 'group';

/**
 * What a construct is when no plan says: a loop has checks, a forEach an item list, a branch a chosen case;
 * otherwise its label's name (`loop#2` is a loop), else a group.
 */
export function kindFromRows(c: RowConstruct): ConstructKind {
  if (c.untils.size > 0) return 'loop';
  if (c.decision && Array.isArray(c.decision.value)) return 'forEach';
  if (c.decision && typeof c.decision.value === 'string') return 'branch';
  const base = c.label.replace(/#\d+'*$/, '');
  if (base.startsWith('forEach(')) return 'forEach';
  if (base === 'loop' || base === 'branch' || base === 'parallel') return base;
  return 'group';
}

/** A plan's constructs by label (agents and sequences are not constructs). */
export function constructsByLabel(node: FlowNode | undefined, into = new Map<string, Exclude<FlowNode, { kind: 'agent' | 'sequence' }>>()) {
  if (!node) return into;
  switch (node.kind) {
    case 'agent':
      break;
    case 'sequence':
      node.children.forEach((c) => constructsByLabel(c, into));
      break;
    case 'parallel':
      into.set(node.label, node);
      node.branches.forEach((c) => constructsByLabel(c, into));
      break;
    case 'loop':
      into.set(node.label, node);
      constructsByLabel(node.body, into);
      break;
    case 'branch':
      into.set(node.label, node);
      node.cases.forEach((c) => constructsByLabel(c, into));
      break;
    case 'forEach':
      into.set(node.label, node);
      if (node.body) constructsByLabel(node.body, into);
      break;
  }
  return into;
}
