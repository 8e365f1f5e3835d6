import type { Tables } from './sql';
import { STEPS, STEP_PAYLOAD_COLUMNS, stepPayloadParams } from './sql-postgres-fragments';

// PostgreSQL SQL text of the store's maintenance writes: the step-range replacement (replaceSteps: retention, truncation), deletion
// and the compare-and-swap of payloads (rewritePayloads, re-encryption). Each a single statement.

/** The maintenance statements of `pgStatements`, built once per store. */
export function pgMaintenanceStatements(t: Tables) {
  return {
    // replaceSteps: these run in one transaction, the run row locked first (as every writer takes it).
    /** $1 run_id. Locks the run row for the change; its epoch for the fence. */
    lockRun: `SELECT lease_epoch FROM ${t.runs} WHERE run_id = $1::text FOR UPDATE`,
    /** $1 run_id, $2 sequence. One row when the run has a step row below it. */
    stepsBefore: `SELECT 1 AS found FROM ${t.steps} WHERE run_id = $1::text AND sequence < $2::int LIMIT 1`,
    /** $1 run_id, $2 from, $3 to (inclusive), $4 the sequences of the replacing rows (upserted, so kept here). */
    deleteStepRange: `DELETE FROM ${t.steps} WHERE run_id = $1::text AND sequence >= $2::int AND sequence <= $3::int AND NOT (sequence = ANY ($4::int[]))`,
    /** $1 run_id, $2 sequence, $3.. the row's columns after (run_id, sequence). A row it replaces keeps its cursor. */
    upsertStep: `INSERT INTO ${t.steps} (${STEPS})
VALUES ($1::text, $2::int, ${stepPayloadParams(3)})
ON CONFLICT (run_id, sequence) DO UPDATE SET ${STEP_PAYLOAD_COLUMNS.map((c) => `${c} = EXCLUDED.${c}`).join(', ')}`,
    /**
     * $1 run_id, $2 cursor_agent, $3 cursor_step. After the range is replaced: last_sequence becomes the last
     * step kept, so the run row's cursor is the one read (see `derivedRunColumns`).
     */
    rewindRun: `UPDATE ${t.runs}
SET cursor_agent = $2::int, cursor_step = $3::int, updated_at = now(),
    last_sequence = COALESCE((SELECT max(sequence) FROM ${t.steps} WHERE run_id = $1::text), 0)
WHERE run_id = $1::text`,

    /** One statement, so a run never exists half-deleted. */
    deleteRun: `WITH s AS (DELETE FROM ${t.steps} WHERE run_id = $1), o AS (DELETE FROM ${t.operations} WHERE run_id = $1),
e AS (DELETE FROM ${t.events} WHERE run_id = $1), b AS (DELETE FROM ${t.batches} WHERE run_id = $1)
DELETE FROM ${t.runs} WHERE run_id = $1`,
  };
}

/**
 * rewritePayloads: one compare-and-swap statement per kind of field, run together in one transaction
 * (the run row first, like every writer). Set-based: the step and operation swaps come as parallel
 * arrays through `unnest`, whatever their number. rowCount = swaps applied. updated_at stays, so
 * listings keep their order. $1 run_id, then `from` and `to` (text), or the arrays
 * ($2 sequences int[] or operation keys text[], $3 from text[], $4 to text[]).
 */
export function pgRewriteStatements(t: Tables) {
  const runSwap = (column: string) => `UPDATE ${t.runs} SET ${column} = $3::text WHERE run_id = $1::text AND ${column} = $2::text`;
  const stepSwap = (column: string) => `UPDATE ${t.steps} s SET ${column} = u.next
FROM unnest($2::int[], $3::text[], $4::text[]) AS u(sequence, prev, next)
WHERE s.run_id = $1::text AND s.sequence = u.sequence AND s.${column} = u.prev`;
  const operationSwap = (column: string) => `UPDATE ${t.operations} o SET ${column} = u.next
FROM unnest($2::text[], $3::text[], $4::text[]) AS u(operation_key, prev, next)
WHERE o.operation_key = u.operation_key AND o.run_id = $1::text AND o.${column} = u.prev`;
  return {
    swapInput: runSwap('input'),
    swapRunError: runSwap('error'),
    swapStepOutputs: stepSwap('output'),
    swapStepMemories: stepSwap('memory'),
    swapOperationResults: operationSwap('result'),
    swapOperationErrors: operationSwap('error'),
  };
}
