import type { StepRecord } from '../src/index';

/**
 * Where and how the stores keep a step, as the bench names it from outside the package (it imports only
 * the public entry points): the default table names, the step row's columns and values, the Redis key of
 * a run's steps. Each is checked against the store it is used on (`checkStepColumns`, the floors that
 * compare with a statement captured from the store, an absent Redis key), so a change in the stores
 * stops the bench instead of measuring something else.
 */

/** The tables of a SQL store under the default `tablePrefix` ('waypoint_'), quoted, schema-qualified on PostgreSQL. */
export function storeTables(schema?: string): { runs: string; steps: string } {
  const qualify = (name: string) => (schema ? `"${schema}"."${name}"` : `"${name}"`);
  return { runs: qualify('waypoint_runs'), steps: qualify('waypoint_steps') };
}

/** The step row's columns that hold the `StepRecord`, in table order. */
export const STEP_RECORD_COLUMNS = [
  'run_id',
  'sequence',
  'checkpoint_id',
  'agent_index',
  'agent_id',
  'step_index',
  'step_name',
  'status',
  'output',
  'memory',
  'idempotency_key',
  'side_effects_committed',
  'started_at',
  'completed_at',
  'attempt',
  'sha256',
  'path',
] as const;

/** The columns after them: the run's cursor after the step, as its append gave it. */
export const STEP_CURSOR_COLUMNS = ['cursor_agent', 'cursor_step'] as const;

/** Every column of the steps table, in order. */
export const STEP_TABLE_COLUMNS: readonly string[] = [...STEP_RECORD_COLUMNS, ...STEP_CURSOR_COLUMNS];

/** How a dialect binds the two types JSON and SQL disagree on: PostgreSQL as they are, SQLite as ms and 0/1. */
export type RowEncoding = 'postgres' | 'sqlite';

/**
 * A step as the store binds it, keyed by column.
 *
 * @example stepColumns(benchStepRow('r', 1, payload), 'sqlite').completed_at // a number of ms
 */
export function stepColumns(step: StepRecord, encoding: RowEncoding): Record<(typeof STEP_RECORD_COLUMNS)[number], unknown> {
  const date = (d: Date) => (encoding === 'sqlite' ? d.getTime() : d);
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
    side_effects_committed: encoding === 'sqlite' ? (step.sideEffectsCommitted ? 1 : 0) : step.sideEffectsCommitted,
    started_at: date(step.startedAt),
    completed_at: date(step.completedAt),
    attempt: step.attempt,
    sha256: step.sha256,
    path: step.path ?? null,
  };
}

/**
 * Throws unless `actual` (the steps table's columns, read from the database) are the ones named here, in order.
 *
 * @example checkStepColumns(rows.map((r) => r.column_name), 'the PostgreSQL steps table');
 */
export function checkStepColumns(actual: readonly string[], where: string): void {
  if (actual.join(',') !== STEP_TABLE_COLUMNS.join(',')) {
    throw new Error(`${where} has the columns (${actual.join(', ')}), the bench knows (${STEP_TABLE_COLUMNS.join(', ')}): update bench/stored-rows.ts`);
  }
}

/** The Redis hash of a run's steps (one field per sequence), under the store's `keyPrefix`. */
export function redisStepsKey(keyPrefix: string, runId: string): string {
  return `${keyPrefix}run:{${runId}}:steps`;
}
