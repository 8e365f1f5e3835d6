import { isDeepStrictEqual } from 'node:util';
import type { LedgerRow } from '../effects/ledger';
import type { StepRecord, Waypoint } from '../../src/index';

/**
 * The checks of one control-flow run after it completed (crashed and resumed, or not): what the store,
 * the ledger and the read model hold, against the same run id executed once without a crash.
 */

const SYSTEM_AGENT = '$waypoint';

/** A row as compared: its kind, path, status and output (decisions carry their value in the output). */
export interface RowView {
  kind: 'step' | 'decision' | 'system';
  path: string;
  status: string;
  output: string;
}

/** What one run (the root or a child) holds after completion. */
export interface RunView {
  runId: string;
  status: string | null;
  parentRunId: string | null;
  rows: RowView[];
  /** Sequences of the rows in store order. */
  sequences: number[];
  lastSequence: number | null;
  /** Operation key -> state, attempts. */
  operations: { key: string; name: string; state: string }[];
  ledgerKeys: string[];
}

/** Everything the checks compare: the root run, its children (as listed by parent) and the final state. */
export interface FlowView {
  root: RunView;
  children: RunView[];
  state: unknown;
}

export function rowView(row: StepRecord): RowView {
  const system = row.agentId === SYSTEM_AGENT;
  const kind = system ? (row.stepName === 'decision' ? 'decision' : 'system') : 'step';
  // A straight-line row has no path of its own; a system row without one is named by its sequence.
  const path = row.path ?? (system ? `${SYSTEM_AGENT}/${row.stepName}` : `${row.agentId}/${row.stepName}`);
  return { kind, path, status: row.status, output: row.output };
}

/** Reads a run and its children through `reader`, and the bookings through `ledger`. */
export async function readFlow(reader: Waypoint, runId: string, ledger: (runId: string) => Promise<LedgerRow[]>): Promise<FlowView> {
  const one = async (id: string): Promise<RunView> => {
    const run = await reader.store.getRun(id);
    const steps = await reader.store.listSteps(id);
    const operations = await reader.store.listOperations(id);
    return {
      runId: id,
      status: run?.status ?? null,
      parentRunId: run?.parentRunId ?? null,
      rows: steps.map(rowView),
      sequences: steps.map((s) => s.sequence),
      lastSequence: run?.lastSequence ?? null,
      operations: operations.map((o) => ({ key: o.operationKey, name: o.name, state: o.state })),
      ledgerKeys: (await ledger(id)).map((r) => r.op_key),
    };
  };
  const children = await reader.store.listRuns({ parentRunId: runId });
  const checkpoint = await reader.checkpoint(runId);
  return {
    root: await one(runId),
    children: await Promise.all(
      children
        .map((c) => c.runId)
        .sort()
        .map(one),
    ),
    state: JSON.parse(JSON.stringify(checkpoint.shared_context)) as unknown,
  };
}

/**
 * Every violation of the guarantees, as sentences (empty when the run is sound): each step path and each
 * decision recorded exactly once and the same ones as the uncrashed run (with the same outputs), sequences
 * 1..n, every booking in the ledger exactly once with one committed operation, the same child runs all
 * completed and listed under the parent, and the final state equal to the uncrashed run's.
 */
export function verifyFlow(actual: FlowView, baseline: FlowView, returnedState?: unknown): string[] {
  const violations: string[] = [];
  const runs = new Map(baseline.children.map((c) => [c.runId, c]));
  compareRun(actual.root, baseline.root, violations);

  const childIds = actual.children.map((c) => c.runId);
  const expectedIds = baseline.children.map((c) => c.runId);
  if (!isDeepStrictEqual(childIds, expectedIds))
    violations.push(`child runs listed under ${actual.root.runId}: ${JSON.stringify(childIds)}, expected ${JSON.stringify(expectedIds)}`);
  for (const child of actual.children) {
    if (child.parentRunId !== actual.root.runId) violations.push(`${child.runId}: parentRunId ${child.parentRunId}, expected ${actual.root.runId}`);
    const expected = runs.get(child.runId);
    if (expected) compareRun(child, expected, violations);
  }

  if (!isDeepStrictEqual(actual.state, baseline.state))
    violations.push(`${actual.root.runId}: final state differs from the uncrashed run's: ${firstDifference(actual.state, baseline.state)}`);
  if (returnedState !== undefined && !isDeepStrictEqual(returnedState, baseline.state)) {
    violations.push(`${actual.root.runId}: the state the last worker returned differs from the uncrashed run's: ${firstDifference(returnedState, baseline.state)}`);
  }
  return violations;
}

function compareRun(actual: RunView, expected: RunView, violations: string[]): void {
  const id = actual.runId;
  if (actual.status !== 'completed') violations.push(`${id}: status ${actual.status}, expected completed`);
  const n = actual.sequences.length;
  if (!actual.sequences.every((s, i) => s === i + 1)) violations.push(`${id}: sequences are not 1..${n}: ${actual.sequences.join(',')}`);
  if (actual.lastSequence !== n) violations.push(`${id}: lastSequence ${actual.lastSequence}, but ${n} rows`);

  for (const kind of ['step', 'decision'] as const) {
    const mine = actual.rows.filter((r) => r.kind === kind);
    const theirs = expected.rows.filter((r) => r.kind === kind);
    for (const [path, count] of counts(mine.map((r) => r.path))) {
      if (count > 1) violations.push(`${id}: ${kind} '${path}' recorded ${count} times`);
    }
    const expectedByPath = new Map(theirs.map((r) => [r.path, r]));
    const actualPaths = new Set(mine.map((r) => r.path));
    for (const r of theirs) if (!actualPaths.has(r.path)) violations.push(`${id}: ${kind} '${r.path}' was never recorded`);
    for (const r of mine) {
      const e = expectedByPath.get(r.path);
      if (!e) violations.push(`${id}: ${kind} '${r.path}' was recorded but the uncrashed run has no such ${kind}`);
      else if (e.status !== r.status) violations.push(`${id}: ${kind} '${r.path}' is ${r.status}, expected ${e.status}`);
      else if (e.output !== r.output) violations.push(`${id}: ${kind} '${r.path}' recorded ${clip(r.output)}, expected ${clip(e.output)}`);
    }
  }
  const system = actual.rows.filter((r) => r.kind === 'system').map((r) => r.path);
  const expectedSystem = expected.rows.filter((r) => r.kind === 'system').map((r) => r.path);
  if (!isDeepStrictEqual(system, expectedSystem)) violations.push(`${id}: system rows ${JSON.stringify(system)}, expected ${JSON.stringify(expectedSystem)}`);

  for (const [key, count] of counts(actual.ledgerKeys)) if (count > 1) violations.push(`${id}: booking ${key} is in the ledger ${count} times`);
  const booked = new Set(actual.ledgerKeys);
  const expectedKeys = [...new Set(expected.ledgerKeys)].sort();
  for (const key of expectedKeys) if (!booked.has(key)) violations.push(`${id}: booking ${key} is missing from the ledger`);
  for (const key of booked) if (!expectedKeys.includes(key)) violations.push(`${id}: booking ${key} is in the ledger but the uncrashed run has none such`);

  // Bookings only: the runtime also keeps a failed step attempt as an operation of its own.
  const bookings = actual.operations.filter((o) => o.name === 'book');
  const committed = bookings.filter((o) => o.state === 'committed').map((o) => o.key);
  for (const o of bookings) if (o.state !== 'committed') violations.push(`${id}: booking operation ${o.key} is ${o.state}`);
  for (const [key, count] of counts(committed)) if (count > 1) violations.push(`${id}: operation ${key} committed ${count} times`);
  if (!isDeepStrictEqual([...new Set(committed)].sort(), expectedKeys)) {
    violations.push(`${id}: committed operations ${JSON.stringify([...committed].sort())}, expected one per booking ${JSON.stringify(expectedKeys)}`);
  }
}

function counts(values: readonly string[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const v of values) out.set(v, (out.get(v) ?? 0) + 1);
  return out;
}

function clip(text: string): string {
  return text.length > 120 ? `${text.slice(0, 120)}...` : text;
}

/** The first property path where two JSON-like values differ, with both values. */
export function firstDifference(a: unknown, b: unknown, at = '$'): string {
  if (isDeepStrictEqual(a, b)) return '(equal)';
  if (a && b && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const key of [...keys].sort()) {
      const x = (a as Record<string, unknown>)[key];
      const y = (b as Record<string, unknown>)[key];
      if (!isDeepStrictEqual(x, y)) return firstDifference(x, y, `${at}.${key}`);
    }
  }
  return `${at} is ${clip(JSON.stringify(a) ?? 'undefined')}, expected ${clip(JSON.stringify(b) ?? 'undefined')}`;
}
