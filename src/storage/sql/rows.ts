import type { OperationRecord, OperationState, RunRecord, RunStatus, StepAppend, StepRecord, StepStatus } from '../../contract/checkpoint-store';
import { STEP_COLUMNS, type StepColumn } from './sql';

/**
 * Rows <-> records. One mapper per table serves both dialects: a timestamp arrives as a Date (pg), an ISO
 * string (pg JSON) or epoch milliseconds (SQLite); a boolean as true/false (pg) or 1/0 (SQLite).
 */

export type Row = Record<string, unknown>;

export function toDate(value: unknown): Date {
  if (value instanceof Date) return new Date(value.getTime());
  if (typeof value === 'number' || typeof value === 'string') {
    const date = new Date(value);
    if (!Number.isNaN(date.getTime())) return date;
  }
  // plain Error: an altered row; the store's guard wraps it as the cause of a typed store error.
  throw new TypeError(`not a timestamp: ${String(value)}`);
}

function toDateOrNull(value: unknown): Date | null {
  return value === null || value === undefined ? null : toDate(value);
}

function str(value: unknown): string {
  return value as string;
}

function strOrNull(value: unknown): string | null {
  return value === null || value === undefined ? null : (value as string);
}

function num(value: unknown): number {
  return typeof value === 'number' ? value : Number(value);
}

export function toRun(row: Row): RunRecord {
  return {
    runId: str(row.run_id),
    pipelineName: str(row.pipeline_name),
    pipelineVersion: str(row.pipeline_version),
    status: row.status as RunStatus,
    cursorAgent: num(row.cursor_agent),
    cursorStep: num(row.cursor_step),
    lastSequence: num(row.last_sequence),
    input: str(row.input),
    metadata: str(row.metadata),
    leaseOwner: strOrNull(row.lease_owner),
    leaseEpoch: num(row.lease_epoch),
    leaseExpiresAt: toDateOrNull(row.lease_expires_at),
    error: strOrNull(row.error),
    resumeHint: strOrNull(row.resume_hint),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    parentRunId: strOrNull(row.parent_run_id),
  };
}

export function toStep(row: Row): StepRecord {
  return {
    runId: str(row.run_id),
    sequence: num(row.sequence),
    checkpointId: str(row.checkpoint_id),
    agentIndex: num(row.agent_index),
    agentId: str(row.agent_id),
    stepIndex: num(row.step_index),
    stepName: str(row.step_name),
    status: row.status as StepStatus,
    output: str(row.output),
    memory: strOrNull(row.memory),
    idempotencyKey: str(row.idempotency_key),
    sideEffectsCommitted: row.side_effects_committed === true || row.side_effects_committed === 1,
    startedAt: toDate(row.started_at),
    completedAt: toDate(row.completed_at),
    attempt: num(row.attempt),
    sha256: str(row.sha256),
    path: strOrNull(row.path),
  };
}

export function toOperation(row: Row): OperationRecord {
  return {
    operationKey: str(row.operation_key),
    runId: str(row.run_id),
    stepKey: str(row.step_key),
    name: str(row.name),
    state: row.state as OperationState,
    result: strOrNull(row.result),
    error: strOrNull(row.error),
    attempts: num(row.attempts),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  };
}

/** How a dialect stores the two types JSON and SQL disagree on. */
export interface ValueEncoding {
  date(value: Date): unknown;
  bool(value: boolean): unknown;
}

export const PG_ENCODING: ValueEncoding = { date: (d) => d, bool: (b) => b };
export const SQLITE_ENCODING: ValueEncoding = { date: (d) => d.getTime(), bool: (b) => (b ? 1 : 0) };

/** A step as a row keyed by column (`STEP_COLUMNS` order gives the positional values). */
export function stepRow(step: StepRecord, enc: ValueEncoding): Record<StepColumn, unknown> {
  return {
    run_id: step.runId,
    sequence: step.sequence,
    checkpoint_id: step.checkpointId,
    agent_index: step.agentIndex,
    agent_id: step.agentId,
    step_index: step.stepIndex,
    step_name: step.stepName,
    status: step.status,
    output: step.output,
    memory: step.memory ?? null,
    idempotency_key: step.idempotencyKey,
    side_effects_committed: enc.bool(step.sideEffectsCommitted),
    started_at: enc.date(step.startedAt),
    completed_at: enc.date(step.completedAt),
    attempt: step.attempt,
    sha256: step.sha256,
    path: step.path ?? null,
  };
}

const STEP_PAYLOAD_COLUMNS = STEP_COLUMNS.slice(2);

/**
 * The positional values of PostgreSQL's `appendStep` statement: $1 run_id, $2 epoch, $3 sequence,
 * $4 cursor_agent, $5 cursor_step, $6 status, $7 resume_hint, then the step columns after (run_id, sequence).
 */
export function pgAppendValues({ step, run, fence }: StepAppend): unknown[] {
  const row = stepRow(step, PG_ENCODING);
  const values: unknown[] = [step.runId, fence.epoch, step.sequence, run.cursorAgent, run.cursorStep, run.status, run.resumeHint ?? null];
  for (const column of STEP_PAYLOAD_COLUMNS) values.push(row[column]);
  return values;
}

/**
 * The array parameters of PostgreSQL's `appendSteps` (group commit): `pgAppendValues` of each append,
 * transposed, so parameter k holds the k-th value of every append.
 */
export function pgAppendArrays(appends: readonly StepAppend[]): unknown[][] {
  const columns: unknown[][] = [];
  appends.forEach((append, row) => {
    pgAppendValues(append).forEach((value, k) => {
      (columns[k] ??= new Array(appends.length))[row] = value;
    });
  });
  return columns;
}
