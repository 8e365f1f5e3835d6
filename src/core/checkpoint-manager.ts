import { randomUUID } from 'node:crypto';
import type { LoadedRun, RunRecord, StepRecord } from '../storage/checkpoint-store';
import { CheckpointCorruptedError, PlanMismatchError, VersionMismatchError } from './errors';
import type { PipelinePlan, StepPlan } from './plan-reader';
import { deserialize, sha256 } from './serializer';
import { mergeState, type SharedState, createState } from './state-schema';

/**
 * Integrity digest of a step row: SHA-256 over its identity and canonical payload, so a flipped byte,
 * a row moved to another run or sequence, or a swapped output is detected on load.
 */
export function stepDigest(step: Omit<StepRecord, 'sha256'>): string {
  return sha256(
    JSON.stringify([
      step.runId,
      step.sequence,
      step.agentIndex,
      step.agentId,
      step.stepIndex,
      step.stepName,
      step.status,
      step.idempotencyKey,
      step.sideEffectsCommitted,
      step.attempt,
      step.output,
      step.memory,
    ]),
  );
}

export interface StepRecordInput {
  runId: string;
  sequence: number;
  step: StepPlan;
  output: string;
  memory: string | null;
  idempotencyKey: string;
  sideEffectsCommitted: boolean;
  startedAt: Date;
  completedAt: Date;
  attempt: number;
}

/** Builds the row for a completed step, digest included. */
export function buildStepRecord(input: StepRecordInput): StepRecord {
  const record: Omit<StepRecord, 'sha256'> = {
    runId: input.runId,
    sequence: input.sequence,
    checkpointId: randomUUID(),
    agentIndex: input.step.agentIndex,
    agentId: input.step.agentId,
    stepIndex: input.step.stepIndex,
    stepName: input.step.name,
    status: 'completed',
    output: input.output,
    memory: input.memory,
    idempotencyKey: input.idempotencyKey,
    sideEffectsCommitted: input.sideEffectsCommitted,
    startedAt: input.startedAt,
    completedAt: input.completedAt,
    attempt: input.attempt,
  };
  return { ...record, sha256: stepDigest(record) };
}

/** Throws `CheckpointCorruptedError` for the first row whose digest does not match its content. */
export function verifySteps(runId: string, steps: readonly StepRecord[]): void {
  let expected = 1;
  for (const step of steps) {
    if (step.runId !== runId) throw new CheckpointCorruptedError(runId, step.sequence, `row belongs to run '${step.runId}'`);
    if (step.sequence !== expected) throw new CheckpointCorruptedError(runId, expected, `sequence ${expected} is missing (found ${step.sequence})`);
    const { sha256: stored, ...rest } = step;
    if (stepDigest(rest) !== stored) throw new CheckpointCorruptedError(runId, step.sequence, 'SHA-256 of the stored payload does not match');
    expected += 1;
  }
}

/** Everything the runtime needs to continue a run, rebuilt from its rows. */
export interface RestoredRun {
  state: SharedState;
  /** Latest serialized memory per agent id. */
  memories: Map<string, string>;
  /** Plan position of the next step to run. */
  position: number;
  lastSequence: number;
}

/**
 * Rebuilds shared state (input folded with every step's output, in sequence order) and agent memories
 * from the stored rows, after checking each row's digest and that the rows match the plan.
 */
export function restoreRun(plan: PipelinePlan, loaded: LoadedRun): RestoredRun {
  const { run, steps } = loaded;
  if (run.pipelineVersion !== plan.version) {
    throw new VersionMismatchError(run.runId, plan.name, run.pipelineVersion, plan.version, 'no checkpoint migration applies');
  }
  verifySteps(run.runId, steps);
  let state = createState(plan.state, deserialize(run.input), { runId: run.runId });
  const memories = new Map<string, string>();
  steps.forEach((row, i) => {
    const expected = plan.steps[i];
    if (!expected || expected.key !== `${row.agentId}/${row.stepName}`) {
      throw new PlanMismatchError(
        run.runId,
        `recorded step ${row.sequence} is '${row.agentId}/${row.stepName}' but the pipeline's step ${i + 1} is ` +
          `'${expected?.key ?? '(none)'}' under the same version ${plan.version}. Bump the pipeline version and register a migration, or restore the previous code.`,
      );
    }
    state = mergeState(state, deserialize<Record<string, unknown>>(row.output));
    if (row.memory !== null) memories.set(row.agentId, row.memory);
  });
  return { state, memories, position: steps.length, lastSequence: run.lastSequence };
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
export function checkpointAt(run: RunRecord, steps: readonly StepRecord[], sequence: number): PipelineCheckpoint {
  verifySteps(run.runId, steps);
  const upTo = steps.filter((s) => s.sequence <= sequence);
  let state: Record<string, unknown> = { ...(deserialize<Record<string, unknown>>(run.input) ?? {}) };
  const memories: Record<string, unknown> = {};
  for (const row of upTo) {
    state = { ...state, ...deserialize<Record<string, unknown>>(row.output) };
    if (row.memory !== null) memories[row.agentId] = deserialize(row.memory);
  }
  const last = upTo[upTo.length - 1];
  const isLatest = sequence >= run.lastSequence;
  const next = steps.find((s) => s.sequence === sequence + 1);
  const cursor = isLatest
    ? { agent: run.cursorAgent, step: run.cursorStep }
    : { agent: next!.agentIndex, step: next!.stepIndex };
  const terminal = isLatest && (run.status === 'completed' || run.status === 'failed' || run.status === 'cancelled');
  return {
    checkpoint_id: last?.checkpointId ?? `${run.runId}:0`,
    pipeline_run_id: run.runId,
    pipeline_name: run.pipelineName,
    pipeline_version: run.pipelineVersion,
    created_at: last?.completedAt ?? run.createdAt,
    checkpoint_sequence: last?.sequence ?? 0,
    current_agent_index: cursor.agent,
    current_step_index: cursor.step,
    completed_steps: upTo.map((row) => ({
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
    })),
    shared_context: state,
    agent_memory_snapshots: memories,
    environment_metadata: deserialize<Record<string, string>>(run.metadata) ?? {},
    is_terminal: terminal,
    resume_hint: isLatest ? run.resumeHint : `Time-travel view at sequence ${sequence}; fork the run to continue from here.`,
  };
}
