import type { MigratableCheckpoint } from '../../decorators/options';
import type { RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { PlanMismatchError, VersionMismatchError } from '../../contract/errors';
import type { BasePayload, CarriedEntry, FlowBase, FlowStart, RestoredRun } from '../run/execution';
import type { FlowNode, PipelinePlan } from '../plan/plan-types';
import { rowPath, SYSTEM_AGENT } from './row-integrity';
import { isJoinRow } from '../flow/join-rows';
import { serialize } from '../state/serializer';
import { deserialize } from '../state/value-decoder';
import { applyMigrations, migrationPath } from './version-migrations';
import { expandPaths, type PathEntry } from './path-runs';

/**
 * Base rows. A tree cannot be folded at an arbitrary row (branches and items in flight), so a base holds
 * the state at a top-level boundary (`done` entries of the root sequence, plus the iterations of a
 * top-level loop, plus the steps of a top-level agent listed in `completed`) and carries, by path, the
 * steps and decisions after it that a migration rewrote. Retention writes the first kind, a checkpoint
 * migration the second. A straight line's base row of an earlier release has no `flow`: its replay starts
 * at the top with its `completed` steps folded.
 */

/** The entries of the pipeline's top-level sequence (one entry when the pipeline is a single construct). */
export function rootEntries(plan: PipelinePlan): FlowNode[] {
  return plan.flow.kind === 'sequence' ? plan.flow.children : [plan.flow];
}

/** What names a top-level entry across versions: an agent's id, a construct's label. */
export function entryKey(node: FlowNode): string {
  switch (node.kind) {
    case 'agent':
      return node.agent.id;
    case 'sequence':
      return `[${node.children.map(entryKey).join(',')}]`;
    default:
      return node.label;
  }
}

/** True for the rows a control-flow run may have besides steps and base rows: decisions, joins and merges, a fork's patch before a step. */
export function isFlowSystemRow(row: StepRecord): boolean {
  return row.agentId === SYSTEM_AGENT && (row.stepName === 'decision' || isJoinRow(row) || (row.stepName === 'patch' && row.path !== undefined && row.path !== null));
}

/**
 * True when a run's rows cannot be read in order by a reader without its pipeline's code: a row inside a
 * construct (a path), a decision, a patch before one step, a join or merge, or a base row of a tree. A
 * straight line's rows fold in order (retention and fork work on them without the pipeline).
 */
export function rowsNeedThePipeline(steps: readonly StepRecord[]): boolean {
  return steps.some(
    (row) =>
      (row.path !== undefined && row.path !== null) ||
      isFlowSystemRow(row) ||
      (row.agentId === SYSTEM_AGENT && row.stepName === 'base' && deserialize<BasePayload>(row.output).flow !== undefined),
  );
}

/** The rows a control-flow run is replayed from: the newest base row's payload, and what it carries plus the rows after it. */
export interface FlowRows {
  /** `completed`: the paths the base folded, as stored (a resume snapshot's in runs, not expanded). */
  base?: { row: StepRecord; payload: BasePayload; completed: PathEntry[] };
  /** Carried entries (as rows) and the rows after the base, in order. */
  rows: StepRecord[];
}

/**
 * Splits a run's rows at its newest base row (rows before it are what it replaced). A straight line's rows of
 * an earlier release read the same way: its base row (no `flow`) folded `completed` from the top, and its
 * path-less patch rows apply before the first step after them.
 */
export function flowRows(runId: string, steps: readonly StepRecord[]): FlowRows {
  let at = -1;
  for (let i = steps.length - 1; i >= 0; i--) {
    const row = steps[i];
    if (row.agentId === SYSTEM_AGENT && row.stepName === 'base') {
      at = i;
      break;
    }
  }
  const after = steps.slice(at + 1);
  const odd = after.find((row) => row.agentId === SYSTEM_AGENT && !isFlowSystemRow(row) && row.stepName !== 'patch');
  if (odd)
    throw new PlanMismatchError(
      runId,
      `row ${odd.sequence} is a '${odd.stepName}' row, which no pipeline can replay. Restore the code that wrote it, or fork the run from before it.`,
    );
  if (at < 0) return { rows: after };
  const row = steps[at];
  const { payload, completed } = baseOf(row);
  return { base: { row, payload, completed }, rows: [...(payload.flow?.carried ?? []).map((entry) => carriedRow(row, entry)), ...after] };
}

/**
 * A base row's payload (its folded entries named in `flow.doneKeys`), and the paths it folded as stored: a
 * retention base's `completed`, then a resume snapshot's compact `completedRuns`, not expanded.
 */
export function baseOf(row: StepRecord): { payload: BasePayload; completed: PathEntry[] } {
  const payload = withDoneKeys(deserialize<BasePayload>(row.output));
  return { payload, completed: [...payload.completed, ...(payload.completedRuns ?? [])] };
}

/** A payload whose `flow` names its folded entries in runs (`doneKeyRuns`, a resume snapshot's), with them as `doneKeys`. */
function withDoneKeys(payload: BasePayload): BasePayload {
  const flow = payload.flow;
  if (!flow?.doneKeyRuns) return payload;
  const { doneKeyRuns, ...rest } = flow;
  return { ...payload, flow: { ...rest, doneKeys: [...flow.doneKeys, ...expandPaths(doneKeyRuns)] } };
}

/** A carried entry as a row the replay can take by path (it shares the base row's sequence). */
function carriedRow(base: StepRecord, entry: CarriedEntry): StepRecord {
  const system = entry.kind === 'decision' || entry.kind === 'patch';
  const parts = entry.path.split('/');
  return {
    ...base,
    path: entry.path,
    agentId: system ? SYSTEM_AGENT : parts[parts.length - 2],
    stepName: entry.kind === 'decision' ? 'decision' : entry.kind === 'patch' ? 'patch' : parts[parts.length - 1],
    status: entry.kind === 'step' ? 'completed' : 'skipped',
    output: entry.output,
    memory: null,
  };
}

/**
 * The row a migrated run's carried entries stand in for until its base row is written (at the next
 * sequence): a base row's columns, never stored and never checked, so its digest and key stay empty.
 * `carriedRow` overrides what identifies each entry (path, agent, step, status, output, memory).
 */
function migrationPlaceholder(runId: string, sequence: number, at: Date): StepRecord {
  return {
    runId,
    sequence,
    checkpointId: 'migration',
    agentIndex: -1,
    agentId: SYSTEM_AGENT,
    stepIndex: -1,
    stepName: 'base',
    status: 'skipped',
    output: '{}',
    memory: null,
    idempotencyKey: '',
    sideEffectsCommitted: false,
    startedAt: at,
    completedAt: at,
    attempt: 1,
    sha256: '',
    path: null,
  };
}

/** Fails when the entries a base row folded are not the first entries of the pipeline's top level any more. */
export function checkFlowStart(plan: PipelinePlan, runId: string, start: FlowStart | undefined): void {
  if (!start) return;
  const keys = rootEntries(plan).map(entryKey).slice(0, start.done);
  if (keys.length !== start.doneKeys.length || keys.some((key, i) => key !== start.doneKeys[i])) {
    throw new PlanMismatchError(
      runId,
      `the run's base row folded the top-level entries [${start.doneKeys.join(', ')}], but pipeline '${plan.name}@${plan.version}' begins with [${keys.join(', ')}]. ` +
        'Restore the previous code, or bump the version and register a migration.',
    );
  }
  const next = rootEntries(plan)[start.done];
  if (start.iterations !== undefined && next?.kind !== 'loop') {
    throw new PlanMismatchError(
      runId,
      `the run's base row is inside a loop at top-level entry ${start.done}, which pipeline '${plan.name}@${plan.version}' does not have there. Restore the previous code, or bump the version and register a migration.`,
    );
  }
}

/** The rows a migration is given, by path: step outputs (a skip as `{}`), decisions, and the patches it carries as they are. */
function recordedByPath(rows: readonly StepRecord[], folded: readonly string[]) {
  const outputs: Record<string, Record<string, unknown>> = {};
  const decisions: Record<string, unknown> = {};
  const skipped = new Set<string>();
  const patches: CarriedEntry[] = [];
  const completedSteps = [...folded];
  for (const row of rows) {
    const path = rowPath(row);
    if (row.agentId === SYSTEM_AGENT) {
      // Joins and merges hold values under the old version: the migrated run records them again as it replays.
      if (isJoinRow(row)) continue;
      if (row.stepName === 'decision') decisions[path] = deserialize<{ value: unknown }>(row.output).value;
      else patches.push({ path, kind: 'patch', output: row.output });
      continue;
    }
    completedSteps.push(path);
    outputs[path] = row.status === 'skipped' ? {} : deserialize<Record<string, unknown>>(row.output);
    if (row.status === 'skipped') skipped.add(path);
  }
  return { outputs, decisions, skipped, patches, completedSteps };
}

/** What `migrateFlow` gives: the rows, state and memories to replay under the new version, and the base row to record. */
export interface MigratedFlow {
  state: Record<string, unknown>;
  memories: Map<string, string>;
  rows: StepRecord[];
  completed: string[];
  migration: NonNullable<RestoredRun['migration']>;
}

/**
 * Migrates a control-flow run to the plan's version. The migration is given the state the replay starts
 * from (the input, or a base row's state), the memories by agent instance, the completed steps by path,
 * and, for a control-flow run, each replayable step's output (`outputs`) and each decision (`decisions`)
 * by path: a rename of a state property is applied to `state` and to the outputs that set it; a renamed
 * or moved step is renamed in `completedSteps` and `outputs`. Every completed path must have a place in
 * the new version. The result is recorded as one base row that carries the rewritten steps and decisions.
 */
export async function migrateFlow(
  plan: PipelinePlan,
  run: RunRecord,
  from: string,
  start: { state: Record<string, unknown>; memories: Map<string, string>; rows: StepRecord[]; folded: string[]; flowStart?: FlowStart },
  fits: (path: string) => boolean,
): Promise<MigratedFlow> {
  const chain = migrationPath(plan.migrations, from, plan.version);
  if (!chain) throw new VersionMismatchError(run.runId, plan.name, from, plan.version, 'no checkpoint migration path is registered');
  const { outputs, decisions, skipped, patches, completedSteps } = recordedByPath(start.rows, start.folded);
  const checkpoint: MigratableCheckpoint = {
    state: start.state,
    memories: Object.fromEntries([...start.memories].map(([id, text]) => [id, deserialize(text)])),
    completedSteps,
    outputs,
    decisions,
  };
  const migrated = await applyMigrations(chain, checkpoint);
  const unknown = migrated.completedSteps.filter((path) => !fits(path));
  if (unknown.length > 0) {
    throw new PlanMismatchError(
      run.runId,
      `after migrating ${from} -> ${plan.version}, completed steps ${unknown.join(', ')} have no place in the pipeline; the migration must rename or drop them (in completedSteps and outputs).`,
    );
  }
  const newOutputs = migrated.outputs ?? {};
  const carried: CarriedEntry[] = [];
  for (const path of migrated.completedSteps) {
    const output = newOutputs[path];
    if (output === undefined) continue; // folded into the state by an earlier base row
    carried.push({ path, kind: skipped.has(path) ? 'skipped' : 'step', output: serialize(output, { runId: run.runId, step: path, what: 'migrated output' }) });
  }
  for (const [path, value] of Object.entries(migrated.decisions ?? {})) {
    carried.push({ path, kind: 'decision', output: serialize({ value }, { runId: run.runId, step: path, what: 'migrated decision' }) });
  }
  carried.push(...patches);
  const memoryTexts = Object.fromEntries(Object.entries(migrated.memories).map(([id, m]) => [id, serialize(m, { runId: run.runId, what: `migrated memory of agent '${id}'` })]));
  const flow: FlowBase = { done: start.flowStart?.done ?? 0, doneKeys: start.flowStart?.doneKeys ?? [], carried };
  if (start.flowStart?.iterations !== undefined) flow.iterations = start.flowStart.iterations;
  const base: BasePayload = { state: migrated.state, completed: migrated.completedSteps, version: plan.version, flow };
  // Until the base row is written, the replay reads the carried entries as rows (they take the next sequence).
  const placeholder = migrationPlaceholder(run.runId, run.lastSequence + 1, start.rows[0]?.completedAt ?? run.updatedAt);
  return {
    state: migrated.state,
    memories: new Map(Object.entries(memoryTexts)),
    rows: carried.map((entry) => carriedRow(placeholder, entry)),
    completed: migrated.completedSteps,
    migration: { from, to: plan.version, base, memories: memoryTexts },
  };
}
