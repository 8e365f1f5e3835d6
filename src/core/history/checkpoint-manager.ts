import { TERMINAL_STATUSES, type LoadedRun, type RunRecord, type StepRecord } from '../../contract/checkpoint-store';
import { CheckpointCorruptedError, PlanMismatchError } from '../../contract/errors';
import type { PipelinePlan } from '../plan/plan-reader';
import { linkOf, rowPath, runIdentity, SYSTEM_AGENT, verifySteps, type Integrity } from './row-integrity';
import { defineData, deserialize } from '../state/value-decoder';
import { type SharedState, createState } from '../state/state-schema';
import type { BasePayload, RestoredRun } from '../run/execution';
import type { ChildStateReader, RootBoundary } from '../flow/flow-executor';
import { FlowReplay } from '../flow/flow-replay';
import { checkFlowStart, flowRows, migrateFlow } from './flow-base';
import { PathSet, type PathEntry } from './path-runs';
import { checkTopLevelOrder, isPlanPath, isTopLevel } from './plan-paths';
import { WHEN } from '../flow/flow-scope';
import { StateFrame } from '../state/state-frame';
import { insideJoin, joinsOf, MERGE, mergedValues } from '../flow/join-rows';

export type { BasePayload } from '../run/execution';

export interface Folded {
  state: Record<string, unknown>;
  memories: Map<string, string>;
  completed: string[];
  version: string;
  /** What the last step row's properties held before it, and its update (a merge row after it records its reducer values as changes to these). */
  replaced?: Record<string, unknown>;
  update?: Record<string, unknown>;
  /** The path of that step row: only its own merge row (`<path>#merge`, the next row) reads `replaced` and `update`. */
  stepPath?: string;
}

/**
 * Folds rows into state: a plan step's output merges into the state; a `base` row (written by a
 * migration, a fork or retention) replaces state, memories and the completed list; a `patch` row merges
 * without completing a step.
 */
export function foldRows(input: Record<string, unknown>, version: string, rows: readonly StepRecord[]): Folded {
  const folded: Folded = { state: assignOwnProps({}, input), memories: new Map(), completed: [], version };
  for (const row of rows) foldRow(folded, row);
  return folded;
}

/**
 * `joins`: the labels of a control-flow run's joined constructs (core/flow/join-rows.ts); a row inside one of
 * them reaches the state through the construct's join row, not by itself.
 */
function foldRow(folded: Folded, row: StepRecord, joins: ReadonlySet<string> | null = null): void {
  // folded.state is the fold's own accumulator: updates are written into it, so a fold is linear in the
  // rows, not quadratic (a copy per row). Readers copy it when they hand it out.
  const own = joins === null || !insideJoin(row, joins);
  if (row.agentId === SYSTEM_AGENT) {
    if (row.stepName === 'base') {
      const base = deserialize<BasePayload>(row.output);
      folded.state = assignOwnProps({}, base.state);
      folded.completed = [...base.completed];
      folded.version = base.version;
      folded.memories = new Map(Object.entries(row.memory === null ? {} : deserialize<Record<string, string>>(row.memory)));
    } else if (row.stepName === 'merge' && own) {
      assignOwnProps(folded.state, mergedOf(row, folded));
    } else if (row.stepName !== 'decision' && own) {
      assignOwnProps(folded.state, deserialize<Record<string, unknown>>(row.output));
    }
    return;
  }
  if (own) {
    const update = deserialize<Record<string, unknown>>(row.output);
    const replaced: Record<string, unknown> = {};
    for (const key of Object.keys(update)) defineData(replaced, key, folded.state[key]);
    folded.replaced = replaced;
    folded.update = update;
    folded.stepPath = rowPath(row);
    assignOwnProps(folded.state, update);
  }
  folded.completed.push(rowPath(row));
  if (row.memory !== null) folded.memories.set(row.agentId, row.memory);
}

/**
 * A merge row's whole values: its deltas applied to what its step's properties held before the step (a property
 * the step row did not set holds what it holds now).
 */
function mergedOf(row: StepRecord, folded: Folded): Record<string, unknown> {
  const adjacent = row.path === `${folded.stepPath}${MERGE}`;
  const replaced = (adjacent && folded.replaced) || {};
  const before = new Proxy(folded.state, { get: (state, key: string) => (Object.prototype.hasOwnProperty.call(replaced, key) ? replaced[key] : state[key]) });
  try {
    return mergedValues(deserialize<Record<string, unknown>>(row.output), before, (adjacent && folded.update) || {});
  } catch (error) {
    throw new CheckpointCorruptedError(row.runId, row.sequence, `${(error as Error).message} (merge row at ${row.path ?? row.sequence})`);
  }
}

function assignOwnProps(target: Record<string, unknown>, source: Record<string, unknown>): Record<string, unknown> {
  for (const key of Object.keys(source)) defineData(target, key, source[key]);
  return target;
}

export type { RestoredRun } from '../run/execution';

/**
 * Rebuilds shared state and agent memories from the stored rows, after checking each row's digest.
 * Under the same version the rows must match the plan step for step; under another version a
 * registered migration chain rewrites the checkpoint (matched by step keys, never by position), or the
 * load fails with `VersionMismatchError`.
 */
export async function restoreRun(plan: PipelinePlan, loaded: LoadedRun, integrity: Integrity = {}, flow: FlowRestoreOptions = {}): Promise<RestoredRun> {
  const { run, steps } = loaded;
  if (!flow.verified) verifySteps(run, steps, integrity);
  const beyond = steps.find((row) => row.sequence > run.lastSequence);
  if (beyond) {
    // The executor holds the lease, so nothing can have been appended since the run row was read.
    throw new CheckpointCorruptedError(run.runId, beyond.sequence, `the row lies beyond the run row's last checkpoint (sequence ${run.lastSequence})`);
  }
  return restoreFlowRun(plan, loaded, flow);
}

/** How a control-flow run is restored: its state replayed from the rows (a completed run, a read) or left at the input. */
export interface FlowRestoreOptions {
  /** Replay the rows into the state (default false: the executor replays them as it runs). */
  replay?: boolean;
  /** Reads a child run's state during a replay. */
  childState?: ChildStateReader;
  /** The caller checked these rows (`verifySteps`) just before: they are not checked again. */
  verified?: boolean;
}

/**
 * A run is replayed, not folded: the executor walks the tree and takes each recorded step and decision by
 * its path. It starts from the input, or from the newest base row (retention's fold of a top-level prefix,
 * or a migration's rewrite, which carries the steps and decisions after that point); the steps a base
 * folded without a row of their own are taken as done.
 */
async function restoreFlowRun(plan: PipelinePlan, loaded: LoadedRun, options: FlowRestoreOptions): Promise<RestoredRun> {
  const { run, steps } = loaded;
  const { base, rows } = flowRows(run.runId, steps);
  const version = base?.payload.version ?? run.pipelineVersion;
  const flow = base?.payload.flow;
  let start: Record<string, unknown> = base ? base.payload.state : deserialize<Record<string, unknown>>(run.input);
  let memories = new Map<string, string>(Object.entries(base?.row.memory ? deserialize<Record<string, string>>(base.row.memory) : {}));
  let replayed = rows;
  // What the base folded, less the steps with rows: kept compact (a snapshot's runs), so a 20,000-step run's resume builds no 20,000 strings.
  let foldedFrom: { entries: readonly PathEntry[]; rows: readonly StepRecord[] } = { entries: base?.completed ?? [], rows };
  let folded = withoutRows(foldedFrom.entries, rows);
  const flowStart = flow
    ? {
        done: flow.done,
        doneKeys: flow.doneKeys,
        ...(flow.iterations === undefined ? {} : { iterations: flow.iterations }),
        ...(flow.steps === undefined ? {} : { steps: flow.steps }),
      }
    : undefined;
  let migration: RestoredRun['migration'];
  if (version !== plan.version) {
    const prefix = foldTopLevelPrefix(plan, { state: start, memories, rows, folded: [...folded] });
    const migrated = await migrateFlow(plan, run, version, { ...prefix, flowStart }, (path) => isPlanPath(plan, path));
    start = migrated.state;
    memories = migrated.memories;
    replayed = migrated.rows;
    foldedFrom = { entries: migrated.completed, rows: replayed };
    folded = withoutRows(migrated.completed, replayed);
    migration = migrated.migration;
  } else {
    checkTopLevelOrder(plan, run.runId, folded, replayed);
  }
  checkFlowStart(plan, run.runId, flowStart);
  const stray = replayed.find((row) => row.agentId !== SYSTEM_AGENT && !isPlanPath(plan, rowPath(row)));
  if (stray) {
    throw new PlanMismatchError(
      run.runId,
      `recorded step '${rowPath(stray)}' (sequence ${stray.sequence}) has no place in pipeline '${plan.name}@${plan.version}' as the code declares it now. ` +
        'The shape changed under the same version: restore the previous code, or bump the version and register a migration.',
    );
  }
  // `start` was decoded for this restore (the base row's state, the input) or built by the migration: it is copied only then.
  const input = createState(plan.state, start, { runId: run.runId }, migration === undefined);
  const last = steps[steps.length - 1];
  const chain = { identity: runIdentity(run), prev: last ? linkOf(last) : '' };
  const completed = withoutRows(foldedFrom.entries, foldedFrom.rows);
  for (const row of replayed) if (row.agentId !== SYSTEM_AGENT) completed.add(rowPath(row));
  const restored: RestoredRun = {
    state: input,
    memories,
    completed,
    folded,
    lastSequence: run.lastSequence,
    chain,
    rows: replayed,
    flowStart,
    migration,
    joins: joinsOf(run.metadata) !== null,
  };
  if (options.replay) restored.state = await replayFlow(plan, run, restored, options.childState);
  return restored;
}

/** The paths of `completed` that have no step row among `rows` (folded into a base's state), kept compact. */
function withoutRows(completed: readonly PathEntry[], rows: readonly StepRecord[]): PathSet {
  const folded = new PathSet(completed);
  for (const row of rows) if (row.agentId !== SYSTEM_AGENT) folded.delete(rowPath(row));
  return folded;
}

/**
 * Before a migration: the rows of the pipeline's top level up to its first construct, folded into the
 * state the migration is given (through the plan's reducers), so a migration of a straight line sees the
 * whole state, as it did before control flow; what follows stays rows (outputs and decisions by path).
 */
function foldTopLevelPrefix(
  plan: PipelinePlan,
  start: { state: Record<string, unknown>; memories: Map<string, string>; rows: StepRecord[]; folded: string[] },
): { state: Record<string, unknown>; memories: Map<string, string>; rows: StepRecord[]; folded: string[] } {
  const frame = new StateFrame(start.state, plan.reducers, false);
  const memories = new Map(start.memories);
  const folded = [...start.folded];
  let at = 0;
  for (; at < start.rows.length; at++) {
    const row = start.rows[at];
    const path = rowPath(row);
    if (row.agentId === SYSTEM_AGENT) {
      if (row.stepName === 'patch' && !row.path) frame.apply(deserialize<Record<string, unknown>>(row.output));
      else if (!path.endsWith(WHEN)) break;
      continue;
    }
    if (!isTopLevel(path)) break;
    if (row.status !== 'skipped') frame.apply(deserialize<Record<string, unknown>>(row.output));
    if (row.memory !== null) memories.set(row.agentId, row.memory);
    folded.push(path);
  }
  return { state: { ...frame.view }, memories, rows: start.rows.slice(at), folded };
}

/** The state a control-flow run's rows give, without running anything (each branch up to its first gap). */
export async function replayFlow(
  plan: PipelinePlan,
  run: RunRecord,
  restored: RestoredRun,
  childState?: ChildStateReader,
  onBoundary?: (boundary: RootBoundary) => void,
): Promise<SharedState> {
  return new FlowReplay({ plan, runId: run.runId, restored, item: itemOf(run) }, childState, onBoundary).replay();
}

/** The item a child run was started for (recorded in its metadata), if it is one. */
export function itemOf(run: Pick<RunRecord, 'metadata'>): { value: unknown; index: number } | undefined {
  const meta = deserialize<Record<string, string> | null>(run.metadata);
  if (!meta || meta.itemIndex === undefined) return undefined;
  return { value: meta.item === undefined ? undefined : deserialize(meta.item), index: Number(meta.itemIndex) };
}

/** Plan position of the first step at or after `from` that is not completed (plan length when none). */
export function nextPosition(plan: PipelinePlan, completed: ReadonlySet<string>, from = 0): number {
  let position = from;
  while (position < plan.steps.length && completed.has(plan.steps[position].key)) position++;
  return position;
}

/** Agent index / step index of the plan position `position` (end of plan: agents.length, 0). */
export function cursorAt(plan: PipelinePlan, position: number): { cursorAgent: number; cursorStep: number } {
  const step = plan.steps[position];
  return step ? { cursorAgent: step.agentIndex, cursorStep: step.stepIndex } : { cursorAgent: plan.agents.length, cursorStep: 0 };
}

/** One completed step in the public read model (the tutorial's `AgentStepResult`). */
export interface AgentStepResult {
  agent_id: string;
  step_index: number;
  step_name: string;
  status: 'pending' | 'running' | 'completed' | 'failed' | 'skipped';
  output: Record<string, unknown> | null;
  error_message: string | null;
  started_at: Date | null;
  completed_at: Date | null;
  idempotency_key: string;
  side_effects_committed: boolean;
}

/**
 * The public read model of a checkpoint (the tutorial's `PipelineCheckpoint`), reconstructed from the
 * run row and the step rows up to `checkpoint_sequence`.
 */
export interface PipelineCheckpoint {
  checkpoint_id: string;
  pipeline_run_id: string;
  pipeline_name: string;
  pipeline_version: string;
  created_at: Date;
  checkpoint_sequence: number;
  current_agent_index: number;
  current_step_index: number;
  completed_steps: AgentStepResult[];
  shared_context: Record<string, unknown>;
  agent_memory_snapshots: Record<string, unknown>;
  environment_metadata: Record<string, string>;
  is_terminal: boolean;
  resume_hint: string | null;
}

/**
 * Reconstructs the checkpoint at `sequence` (0 = before any step) from verified rows. Cursor indexes
 * are derived from the agent/step of the next recorded step, or the run's cursor for the latest one.
 */
export function checkpointAt(run: RunRecord, steps: readonly StepRecord[], sequence: number, integrity: Integrity = {}): PipelineCheckpoint {
  return checkpointsOf(run, steps, integrity, sequence)[0];
}

/**
 * The read model at every sequence from 0 (the input) or from a retention base to the latest (or only
 * at `only`), verifying the rows once and folding them
 * in one pass instead of once per checkpoint.
 */
export function checkpointsOf(run: RunRecord, steps: readonly StepRecord[], integrity: Integrity = {}, only?: number): PipelineCheckpoint[] {
  verifySteps(run, steps, integrity);
  const folded: Folded = { state: { ...(deserialize<Record<string, unknown>>(run.input) ?? {}) }, memories: new Map(), completed: [], version: run.pipelineVersion };
  const environment = deserialize<Record<string, string>>(run.metadata) ?? {};
  const joins = joinsOf(run.metadata);
  const results: AgentStepResult[] = [];
  const out: PipelineCheckpoint[] = [];
  const emit = (index: number) => {
    const last = index >= 0 ? steps[index] : undefined;
    const sequence = last?.sequence ?? 0;
    const isLatest = sequence >= run.lastSequence;
    const next = steps[index + 1];
    const cursor = isLatest || !next ? { agent: run.cursorAgent, step: run.cursorStep } : { agent: next.agentIndex, step: next.stepIndex };
    out.push({
      checkpoint_id: last?.checkpointId ?? `${run.runId}:0`,
      pipeline_run_id: run.runId,
      pipeline_name: run.pipelineName,
      pipeline_version: folded.version,
      created_at: last?.completedAt ?? run.createdAt,
      checkpoint_sequence: sequence,
      current_agent_index: cursor.agent,
      current_step_index: cursor.step,
      completed_steps: results.slice(),
      shared_context: { ...folded.state },
      agent_memory_snapshots: Object.fromEntries([...folded.memories].map(([id, text]) => [id, deserialize(text)])),
      environment_metadata: environment,
      is_terminal: isLatest && TERMINAL_STATUSES.has(run.status),
      resume_hint: isLatest ? run.resumeHint : `Time-travel view at sequence ${sequence}; fork the run to continue from here.`,
    });
  };
  // Sequence 0 (the input, nothing completed) opens the history, unless retention folded it into a base row.
  const startFolded = steps[0]?.agentId === SYSTEM_AGENT && steps[0].stepName === 'base';
  if (only === 0 || (only === undefined && !startFolded)) emit(-1);
  steps.forEach((row, index) => {
    foldRow(folded, row, joins);
    // A step's merge row (its reducer properties merged) is part of the step: its checkpoint shows the merged values.
    const next = steps[index + 1];
    if (joins && row.agentId !== SYSTEM_AGENT && next?.agentId === SYSTEM_AGENT && next.stepName === 'merge' && next.path === `${rowPath(row)}${MERGE}`)
      foldRow(folded, next, joins);
    if (row.agentId !== SYSTEM_AGENT) results.push(toStepResult(row));
    if (only === undefined || row.sequence === only) emit(index);
  });
  return out;
}

function toStepResult(row: StepRecord): AgentStepResult {
  return {
    agent_id: row.agentId,
    step_index: row.stepIndex,
    step_name: row.stepName,
    status: row.status,
    output: deserialize<Record<string, unknown>>(row.output),
    error_message: null,
    started_at: row.startedAt,
    completed_at: row.completedAt,
    idempotency_key: row.idempotencyKey,
    side_effects_committed: row.sideEffectsCommitted,
  };
}
