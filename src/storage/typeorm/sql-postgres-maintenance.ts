import type { Tables } from './sql';
import { STEPS, STEP_PAYLOAD_COLUMNS, stepPayloadParams } from './sql-postgres-fragments';

// PostgreSQL SQL text of the store's maintenance writes: retention (compactSteps), truncation, deletion
// and the compare-and-swap of payloads (rewritePayloads, re-encryption). Each a single statement.

/** The maintenance statements of `pgStatements`, built once per store. */
export function pgMaintenanceStatements(t: Tables) {
  return {
    /**
     * Retention. $1 run_id, $2 base sequence, $3.. the base row's columns after (run_id, sequence).
     * Rows before the base go, the base row replaces the one at its sequence; nothing happens unless a
     * row older than the base exists. The DELETE and the upsert touch disjoint rows, so one statement
     * suffices.
     */
    compactSteps: `WITH old AS (SELECT 1 FROM ${t.steps} WHERE run_id = $1::text AND sequence < $2::int LIMIT 1),
d AS (DELETE FROM ${t.steps} WHERE run_id = $1::text AND sequence < $2::int AND EXISTS (SELECT 1 FROM old))
INSERT INTO ${t.steps} (${STEPS})
SELECT $1::text, $2::int, ${stepPayloadParams(3)}
WHERE EXISTS (SELECT 1 FROM old)
ON CONFLICT (run_id, sequence) DO UPDATE SET ${STEP_PAYLOAD_COLUMNS.map((c) => `${c} = EXCLUDED.${c}`).join(', ')}`,

    /**
     * Fenced. $1 run_id, $2 from sequence, $3 cursor_agent, $4 cursor_step, $5 epoch. Drops steps
     * >= from and moves the run back: the run row's last_sequence becomes the last step kept, so its
     * cursor is the one read (see `derivedRunColumns`). Returns one row: `fenced` (0 or 1).
     */
    truncateSteps: `WITH r AS (
  UPDATE ${t.runs}
  SET cursor_agent = $3::int, cursor_step = $4::int, updated_at = now(),
      last_sequence = COALESCE((SELECT max(sequence) FROM ${t.steps} WHERE run_id = $1::text AND sequence < $2::int), 0)
  WHERE run_id = $1::text AND lease_epoch = $5::int
  RETURNING run_id
),
d AS (DELETE FROM ${t.steps} s USING r WHERE s.run_id = r.run_id AND s.sequence >= $2::int)
SELECT count(*)::int AS fenced FROM r`,

    /** One statement, so a run never exists half-deleted. */
    deleteRun: `WITH s AS (DELETE FROM ${t.steps} WHERE run_id = $1), o AS (DELETE FROM ${t.operations} WHERE run_id = $1)
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
