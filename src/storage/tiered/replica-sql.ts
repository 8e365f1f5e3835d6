import { createHash } from 'node:crypto';
import type { OperationRecord, RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { PG_ENCODING, stepRow } from '../sql/rows';
import { OPERATION_COLUMNS, RUN_COLUMNS, STEP_COLUMNS, columnList, type Tables } from '../sql/sql';

/**
 * The write-behind flusher's PostgreSQL statements: it copies state that Redis already accepted (fenced
 * there), so these are plain idempotent upserts and deletes, never fenced. Each upsert takes one array
 * per column and writes any number of rows in one statement (`unnest`), so a batch of journal entries
 * costs a handful of round trips whatever its size.
 */
const RUN_TYPES: Record<string, string> = {
  cursor_agent: 'int',
  cursor_step: 'int',
  last_sequence: 'int',
  lease_epoch: 'int',
  lease_expires_at: 'timestamptz',
  created_at: 'timestamptz',
  updated_at: 'timestamptz',
};
const STEP_TYPES: Record<string, string> = {
  sequence: 'int',
  agent_index: 'int',
  step_index: 'int',
  side_effects_committed: 'boolean',
  started_at: 'timestamptz',
  completed_at: 'timestamptz',
  attempt: 'int',
};
const OPERATION_TYPES: Record<string, string> = { attempts: 'int', created_at: 'timestamptz', updated_at: 'timestamptz' };

function upsert(table: string, columns: readonly string[], types: Record<string, string>, key: string[]): string {
  const arrays = columns.map((c, i) => `$${i + 1}::${types[c] ?? 'text'}[]`).join(', ');
  const updates = columns
    .filter((c) => !key.includes(c))
    .map((c) => `${c} = EXCLUDED.${c}`)
    .join(', ');
  return `INSERT INTO ${table} (${columnList(columns)}) SELECT * FROM unnest(${arrays}) ON CONFLICT (${key.join(', ')}) DO UPDATE SET ${updates}`;
}

/**
 * @example
 * const sql = pgReplicaStatements(tableNames({ schema: 'wp', prefix: 'waypoint_' }));
 * await client.query(sql.upsertRuns, runColumns(runs));
 */
export function pgReplicaStatements(t: Tables) {
  return {
    /** $1 run_id. One row when the run exists. */
    runExists: `SELECT 1 FROM ${t.runs} WHERE run_id = $1`,
    /** $1 run ids. The last sequence of those stored (the run row's, or its last step's when newer: schema V5). */
    lastSequences: `SELECT r.run_id, GREATEST(r.last_sequence, COALESCE((SELECT max(s.sequence) FROM ${t.steps} s WHERE s.run_id = r.run_id), 0)) AS last_sequence
FROM ${t.runs} r WHERE r.run_id = ANY($1::text[])`,
    /** $1 run ids, $2 one sequence each. The checkpoint id of each of those rows PostgreSQL has (the flusher's link check). */
    stepsAt: `SELECT s.run_id, s.checkpoint_id FROM ${t.steps} s JOIN unnest($1::text[], $2::int[]) AS k(run_id, sequence) ON s.run_id = k.run_id AND s.sequence = k.sequence`,
    /** One array per run column, in RUN_COLUMNS order. */
    upsertRuns: upsert(t.runs, RUN_COLUMNS, RUN_TYPES, ['run_id']),
    /** One array per step column, in STEP_COLUMNS order. */
    upsertSteps: upsert(t.steps, STEP_COLUMNS, STEP_TYPES, ['run_id', 'sequence']),
    /** One array per operation column, in OPERATION_COLUMNS order. */
    upsertOperations: upsert(t.operations, OPERATION_COLUMNS, OPERATION_TYPES, ['operation_key']),
    /** Truncation. $1 run_id, $2 first sequence dropped. */
    dropStepsFrom: `DELETE FROM ${t.steps} WHERE run_id = $1 AND sequence >= $2`,
    /** Retention. $1 run_id, $2 the base row's sequence (rows before it go). */
    dropStepsBefore: `DELETE FROM ${t.steps} WHERE run_id = $1 AND sequence < $2`,
    /** $1 run_id. The run, its steps and its operations. */
    deleteRun: `WITH s AS (DELETE FROM ${t.steps} WHERE run_id = $1), o AS (DELETE FROM ${t.operations} WHERE run_id = $1)
DELETE FROM ${t.runs} WHERE run_id = $1`,
    /** $1 lock key. Only the session holding it flushes: two flushers never write at once. */
    tryLead: `SELECT pg_try_advisory_lock($1::bigint) AS led`,
    unlead: `SELECT pg_advisory_unlock($1::bigint)`,
    /** $1 lock key. Held from reading Redis to commit by a flush batch, a delete or a copy back into Redis. */
    applyLock: `SELECT pg_advisory_xact_lock($1::bigint)`,
  };
}

/**
 * The advisory lock keys of one journal on one set of tables (64-bit keys from both names): `lead` is
 * the flusher role; `apply` serializes what moves a run between the tiers (a flush batch, `deleteRun`,
 * a copy back into Redis), so none of them can act on the other's half-done state.
 */
export function replicaLockKeys(stream: string, runsTable: string): { lead: string; apply: string } {
  const key = (purpose: string) => createHash('sha256').update(`${purpose}\u0000${stream}\u0000${runsTable}`).digest().readBigInt64BE(0).toString();
  return { lead: key('lead'), apply: key('apply') };
}

export type ReplicaStatements = ReturnType<typeof pgReplicaStatements>;

/** Column-major values (one array per column) of records, in the order of `columns`. */
function byColumn(columns: readonly string[], rows: readonly Record<string, unknown>[]): unknown[][] {
  return columns.map((column) => rows.map((row) => row[column] ?? null));
}

export function runColumns(runs: readonly RunRecord[]): unknown[][] {
  return byColumn(
    RUN_COLUMNS,
    runs.map((r) => ({
      run_id: r.runId,
      pipeline_name: r.pipelineName,
      pipeline_version: r.pipelineVersion,
      status: r.status,
      cursor_agent: r.cursorAgent,
      cursor_step: r.cursorStep,
      last_sequence: r.lastSequence,
      input: r.input,
      metadata: r.metadata,
      lease_owner: r.leaseOwner,
      lease_epoch: r.leaseEpoch,
      lease_expires_at: r.leaseExpiresAt,
      error: r.error,
      resume_hint: r.resumeHint,
      created_at: r.createdAt,
      updated_at: r.updatedAt,
      parent_run_id: r.parentRunId ?? null,
    })),
  );
}

export function stepColumns(steps: readonly StepRecord[]): unknown[][] {
  return byColumn(
    STEP_COLUMNS,
    steps.map((s) => stepRow(s, PG_ENCODING)),
  );
}

export function operationColumns(operations: readonly OperationRecord[]): unknown[][] {
  return byColumn(
    OPERATION_COLUMNS,
    operations.map((o) => ({
      operation_key: o.operationKey,
      run_id: o.runId,
      step_key: o.stepKey,
      name: o.name,
      state: o.state,
      result: o.result,
      error: o.error,
      attempts: o.attempts,
      created_at: o.createdAt,
      updated_at: o.updatedAt,
    })),
  );
}
