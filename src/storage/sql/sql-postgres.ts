import type { RunFilter } from '../../contract/checkpoint-store';
import {
  type BuiltQuery,
  type RunPatchField,
  type Tables,
  OPERATION_COLUMNS,
  RUN_COLUMNS,
  RUN_PATCH_COLUMNS,
  STEP_COLUMNS,
  columnList,
  derivedRunColumns,
  pinRunToLog,
} from './sql';
import {
  APPEND_ARRAY_NAMES,
  APPEND_ARRAY_PARAMS,
  OPS,
  RUNS,
  STEPS,
  STEP_INSERT_COLUMNS,
  lastStep,
  nextSequence,
  pgRunList,
  pgRunRead,
  stepPayloadParams,
  transition,
} from './sql-postgres-fragments';
import { pgMaintenanceStatements } from './sql-postgres-maintenance';

export { pgRunList, pgRunRead } from './sql-postgres-fragments';
export { pgRewriteStatements } from './sql-postgres-maintenance';

/**
 * PostgreSQL SQL text. Every statement that advances a run is ONE statement (one round trip): the fence
 * (lease epoch) is checked by the same statement that writes, never by a separate read first.
 * Timestamps are `timestamptz(3)`: millisecond precision, so a JS Date round-trips exactly; the clock is
 * the server's `now()`, one clock for every worker's leases.
 *
 * Appends (schema V5, issue 22) write one step row and nothing else in the common case: the run row is
 * locked FOR SHARE (the fence: a lease takeover's UPDATE waits for the append's commit, and an append
 * after a takeover sees the new epoch and writes nothing), the sequence is checked against the last step
 * row (and the (run_id, sequence) key), and the run row is written only when the append changes its
 * status or resume hint. Readers derive the live sequence, cursor and updatedAt from the last step row
 * (`derivedRunColumns`). An append that leaves the run running goes first as `appendSteady`, which has no
 * run-row UPDATE at all (planning and opening one cost the server even when it writes nothing); the
 * statement with the transition follows only when that wrote nothing.
 */

/**
 * The end of a fenced operation write (CTEs `f`, the fence, and `up`, the upsert): the row written, or,
 * when nothing was (a committed operation is never overwritten), the row as stored; `fenced` says whether
 * the fence held. $1 is the operation key.
 */
function writtenOrStored(t: Tables): string {
  return `SELECT true AS fenced, ${OPS} FROM up
UNION ALL
SELECT EXISTS (SELECT 1 FROM f) AS fenced, ${columnList(OPERATION_COLUMNS, 'o')}
FROM ${t.operations} o WHERE o.operation_key = $1::text AND NOT EXISTS (SELECT 1 FROM up)`;
}

/** The fixed statements of a store, built once per store so the hot path only binds values. */
export function pgStatements(t: Tables) {
  return {
    /**
     * $1 run_id, $2 pipeline_name, $3 pipeline_version, $4 input, $5 metadata, $6 parent_run_id. Returns the row with
     * `created`. Returns no row when a concurrent insert won but is newer than this statement's snapshot:
     * the caller then reads the row again.
     */
    createRun: `WITH ins AS (
  INSERT INTO ${t.runs} (${RUNS})
  VALUES ($1, $2, $3, 'running', 0, 0, 0, $4, $5, NULL, 0, NULL, NULL, NULL, now(), now(), $6::text)
  ON CONFLICT (run_id) DO NOTHING
  RETURNING ${RUNS}
)
SELECT true AS created, ${RUNS} FROM ins
UNION ALL
SELECT false AS created, ${derivedRunColumns('r', 'l')} FROM ${t.runs} r ${lastStep(t, 'r')}
WHERE r.run_id = $1 AND NOT EXISTS (SELECT 1 FROM ins)`,

    getRun: `${pgRunRead(t)} WHERE r.run_id = $1`,

    /**
     * The run and all its steps in one round trip and one snapshot, as native columns (no JSON to escape
     * and parse): the first row is the run (its columns prefixed `run_`, the step columns NULL, so
     * `sequence` NULL), then one row per step (run columns NULL), ordered.
     */
    loadRun: `SELECT ${derivedRunColumns('r', 'l', (c) => `run_${c}`)}, ${STEP_COLUMNS.map((c) => `NULL AS ${c}`).join(', ')}
FROM ${t.runs} r ${lastStep(t, 'r')} WHERE r.run_id = $1
UNION ALL
SELECT ${RUN_COLUMNS.map((c) => `NULL AS run_${c}`).join(', ')}, ${columnList(STEP_COLUMNS, 's')}
FROM ${t.steps} s WHERE s.run_id = $1
ORDER BY sequence NULLS FIRST`,

    /** $1 run_id, $2 from, $3 to (inclusive). */
    listSteps: `SELECT ${STEPS} FROM ${t.steps} WHERE run_id = $1 AND sequence >= $2 AND sequence <= $3 ORDER BY sequence`,

    /**
     * The hot path. $1 run_id, $2 epoch, $3 sequence, $4 cursor_agent, $5 cursor_step, $6 status,
     * $7 resume_hint, $8.. the step columns after (run_id, sequence). `f` is the fence and the sequence check:
     * the run row at this epoch, locked FOR SHARE, when $3 follows the last step row. The step row is
     * inserted only when it matched; the run row is written unless the run stays running with the same hint. rowCount
     * 0 means the write was rejected (a duplicate sequence raised by a concurrent writer of the same epoch
     * is a unique violation, which the caller maps to the same rejection).
     */
    appendStep: `WITH f AS (
  SELECT run_id, status, resume_hint FROM ${t.runs}
  WHERE run_id = $1::text AND lease_epoch = $2::int AND $3::int = ${nextSequence(t, '$1::text')}
  FOR SHARE
),
u AS (
  ${transition(t, { sequence: '$3::int', cursorAgent: '$4::int', cursorStep: '$5::int', status: '$6::text', hint: '$7::text' }, 'f', 't.run_id = f.run_id')}
)
INSERT INTO ${t.steps} (${STEP_INSERT_COLUMNS})
SELECT f.run_id, $3::int, ${stepPayloadParams(8)}, $4::int, $5::int
FROM f`,

    /**
     * The steady append, tried first whenever the run stays `running` ($6): `appendStep` without the
     * run-row transition, so the statement plans and opens no UPDATE of the runs table. The fence also
     * requires the stored row to be `running` with the same hint ($7); when it is not (a resume from
     * `paused`, a hint the run takes) or the fence or sequence is stale, nothing is written and the caller
     * sends `appendStep`, which writes the transition or rejects. Same parameters as `appendStep`.
     */
    appendSteady: `WITH f AS (
  SELECT run_id FROM ${t.runs}
  WHERE run_id = $1::text AND lease_epoch = $2::int AND $6::text = 'running' AND status = 'running'
    AND resume_hint IS NOT DISTINCT FROM $7::text AND $3::int = ${nextSequence(t, '$1::text')}
  FOR SHARE
)
INSERT INTO ${t.steps} (${STEP_INSERT_COLUMNS})
SELECT f.run_id, $3::int, ${stepPayloadParams(8)}, $4::int, $5::int
FROM f`,

    /**
     * Group commit (see group-commit.ts): several runs' steady appends in one statement. Every parameter
     * is an array with one element per append, in `appendStep`'s parameter order ($1 run_ids, $2 epochs,
     * ...). Each element is fenced and sequence-checked as in `appendSteady`, with no run-row transition;
     * only the appends whose run row matched insert their step. Returns `ord`, the 1-based positions of
     * the appends that were applied; the caller sends the others alone to `appendStep`. The caller never
     * puts two appends of one run in a batch.
     */
    appendSteps: `WITH i AS (
  SELECT * FROM unnest(${APPEND_ARRAY_PARAMS}) WITH ORDINALITY AS i(${APPEND_ARRAY_NAMES}, ord)
),
f AS (
  SELECT i.ord FROM i JOIN ${t.runs} r ON r.run_id = i.run_id
  WHERE r.lease_epoch = i.epoch AND i.run_status = 'running' AND r.status = 'running'
    AND r.resume_hint IS NOT DISTINCT FROM i.resume_hint AND i.sequence = ${nextSequence(t, 'i.run_id')}
  FOR SHARE OF r
),
s AS (
  INSERT INTO ${t.steps} (${STEP_INSERT_COLUMNS})
  SELECT ${STEP_COLUMNS.map((c) => `i.${c}`).join(', ')}, i.cursor_agent, i.cursor_step
  FROM i JOIN f ON f.ord = i.ord
)
SELECT ord::int FROM f`,

    /**
     * Consecutive appends of ONE run in one statement (the arrays of `appendSteps`, ordered by sequence):
     * fenced and sequence-checked once against the first; every step row is inserted only when it matched,
     * and the run row takes the last one's cursor and status only when that changes its status or hint.
     * rowCount 0 means rejected.
     */
    appendRun: `WITH i AS (
  SELECT * FROM unnest(${APPEND_ARRAY_PARAMS}) WITH ORDINALITY AS i(${APPEND_ARRAY_NAMES}, ord)
),
l AS (SELECT * FROM i ORDER BY ord DESC LIMIT 1),
f AS (
  SELECT r.run_id, r.status, r.resume_hint FROM ${t.runs} r
  WHERE r.run_id = (SELECT run_id FROM l) AND r.lease_epoch = (SELECT epoch FROM l)
    AND (SELECT min(sequence) FROM i) = ${nextSequence(t, 'r.run_id')}
  FOR SHARE OF r
),
u AS (
  ${transition(t, { sequence: 'l.sequence', cursorAgent: 'l.cursor_agent', cursorStep: 'l.cursor_step', status: 'l.run_status', hint: 'l.resume_hint' }, 'l, f', 't.run_id = f.run_id')}
)
INSERT INTO ${t.steps} (${STEP_INSERT_COLUMNS})
SELECT ${STEP_COLUMNS.map((c) => `i.${c}`).join(', ')}, i.cursor_agent, i.cursor_step
FROM i, f`,

    /** $1 run_id, $2 owner, $3 ttl ms, $4 dead owner or null. Free, expired, ours or a dead owner's: take it and bump the epoch. */
    acquireLease: `UPDATE ${t.runs}
SET lease_owner = $2::text, lease_epoch = lease_epoch + 1, lease_expires_at = now() + $3::float8 * interval '1 millisecond'
WHERE run_id = $1::text
  AND (lease_owner IS NULL OR lease_owner = $2::text OR lease_owner = $4::text OR lease_expires_at IS NULL OR lease_expires_at <= now())
RETURNING lease_epoch, lease_expires_at`,

    /**
     * $1 run_id, $2 owner, $3 epoch, $4 ttl ms, or null to free the lease (the epoch stays: it is never
     * reused). rowCount 0: the lease is not ours at that epoch.
     */
    setLeaseExpiry: `UPDATE ${t.runs}
SET lease_owner = CASE WHEN $4::float8 IS NULL THEN NULL ELSE lease_owner END,
    lease_expires_at = now() + $4::float8 * interval '1 millisecond'
WHERE run_id = $1::text AND lease_owner = $2::text AND lease_epoch = $3::int`,

    getOperation: `SELECT ${OPS} FROM ${t.operations} WHERE operation_key = $1`,

    /**
     * $1 operation_key, $2 run_id, $3 step_key, $4 name, $5 epoch. FOR SHARE holds the run row so a lease
     * takeover cannot slip between the fence check and the write. Returns the record as it stands with
     * `fenced`; a committed operation comes back unchanged.
     */
    beginOperation: `WITH f AS (SELECT run_id FROM ${t.runs} WHERE run_id = $2::text AND lease_epoch = $5::int FOR SHARE),
up AS (
  INSERT INTO ${t.operations} AS o (${OPS})
  SELECT $1::text, f.run_id, $3::text, $4::text, 'started', NULL, NULL, 1, now(), now() FROM f
  ON CONFLICT (operation_key) DO UPDATE SET state = 'started', attempts = o.attempts + 1, updated_at = now()
  WHERE o.state <> 'committed'
  RETURNING ${columnList(OPERATION_COLUMNS, 'o')}
)
${writtenOrStored(t)}`,

    /** $1 operation_key, $2 result, $3 run_id, $4 epoch. Returns one row: `fenced`. */
    commitOperation: finishOperation(t, `state = 'committed', result = $2::text, error = NULL`),
    /** $1 operation_key, $2 error, $3 run_id, $4 epoch. Returns one row: `fenced`. */
    failOperation: finishOperation(t, `state = 'failed', error = $2::text`),

    listOperations: `SELECT ${OPS} FROM ${t.operations} WHERE run_id = $1 ORDER BY created_at, operation_key`,

    /**
     * writeOperation, unfenced insert-if-absent. $1 operation_key, $2 run_id, $3 step_key, $4 name, $5 state,
     * $6 result, $7 error, $8 attempts. Returns the stored record (the existing one, unchanged, on conflict).
     */
    insertOperation: `WITH ins AS (
  INSERT INTO ${t.operations} (${OPS})
  VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $8::int, now(), now())
  ON CONFLICT (operation_key) DO NOTHING
  RETURNING ${OPS}
)
SELECT ${OPS} FROM ins
UNION ALL
SELECT ${OPS} FROM ${t.operations} WHERE operation_key = $1::text AND NOT EXISTS (SELECT 1 FROM ins)`,

    /**
     * writeOperation under a fence: the parameters of insertOperation, then $9 epoch. FOR SHARE holds the
     * run row, as beginOperation does. Returns the record as it stands with `fenced`; a committed record
     * comes back unchanged.
     */
    upsertOperation: `WITH f AS (SELECT run_id FROM ${t.runs} WHERE run_id = $2::text AND lease_epoch = $9::int FOR SHARE),
up AS (
  INSERT INTO ${t.operations} AS o (${OPS})
  SELECT $1::text, f.run_id, $3::text, $4::text, $5::text, $6::text, $7::text, $8::int, now(), now() FROM f
  ON CONFLICT (operation_key) DO UPDATE SET step_key = EXCLUDED.step_key, name = EXCLUDED.name, state = EXCLUDED.state,
    result = EXCLUDED.result, error = EXCLUDED.error, attempts = EXCLUDED.attempts, updated_at = now()
  WHERE o.state <> 'committed'
  RETURNING ${columnList(OPERATION_COLUMNS, 'o')}
)
${writtenOrStored(t)}`,

    /**
     * $1 run_id, $2 resume_hint. Cancels a non-terminal run and fences its executor out in the same write
     * (lease cleared, epoch + 1). Returns the run with `cancelled` (false: it was already terminal).
     */
    cancelRun: `WITH c AS (
  UPDATE ${t.runs} AS r
  SET status = 'cancelled', resume_hint = $2, lease_owner = NULL, lease_expires_at = NULL,
      lease_epoch = r.lease_epoch + 1, updated_at = now(), ${pinRunToLog(t, 'postgres', { cursor: true }).join(', ')}
  WHERE r.run_id = $1 AND r.status NOT IN ('completed', 'cancelled')
  RETURNING ${RUNS}
)
SELECT true AS cancelled, ${derivedRunColumns('c', 'l')} FROM c ${lastStep(t, 'c')}
UNION ALL
SELECT false AS cancelled, ${derivedRunColumns('r', 'l')} FROM ${t.runs} r ${lastStep(t, 'r')}
WHERE r.run_id = $1 AND NOT EXISTS (SELECT 1 FROM c)`,

    ...pgMaintenanceStatements(t),

    /** Tells a rejected fenced write apart from a missing row, off the hot path; the fence check of a transaction. */
    leaseEpoch: `SELECT lease_epoch FROM ${t.runs} WHERE run_id = $1`,
  };
}

export type PgStatements = ReturnType<typeof pgStatements>;

/** Statements only a step's transaction runs (besides the shared ones), built once per store. */
export function pgTransactionStatements(t: Tables) {
  return {
    /**
     * One attempt of a transactional side effect, written inside the step's transaction (whose fenced
     * appendStep guards it, so no fence here). $1 operation_key, $2 run_id, $3 step_key, $4 name,
     * $5 state, $6 result, $7 error. Returns no row when the operation is already committed.
     */
    recordOperation: `INSERT INTO ${t.operations} AS o (${OPS})
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, 1, now(), now())
ON CONFLICT (operation_key) DO UPDATE SET state = EXCLUDED.state, result = EXCLUDED.result, error = EXCLUDED.error,
  attempts = o.attempts + 1, updated_at = now()
WHERE o.state <> 'committed'
RETURNING ${columnList(OPERATION_COLUMNS, 'o')}`,
  };
}

export type PgTransactionStatements = PgStatements & ReturnType<typeof pgTransactionStatements>;

function finishOperation(t: Tables, set: string): string {
  return `WITH f AS (SELECT 1 FROM ${t.runs} WHERE run_id = $3::text AND lease_epoch = $4::int FOR SHARE),
u AS (
  UPDATE ${t.operations} SET ${set}, updated_at = now()
  WHERE operation_key = $1::text AND state <> 'committed' AND EXISTS (SELECT 1 FROM f)
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM f) AS fenced, (SELECT count(*) FROM u)::int AS updated`;
}

/**
 * `UPDATE runs SET <fields>, updated_at = now() WHERE run_id = $1 [AND lease_epoch = $n]`. Values: run id,
 * then the patch fields in `fields` order, then the epoch when fenced.
 */
export function pgUpdateRun(t: Tables, fields: readonly RunPatchField[], fenced: boolean): string {
  const sets = fields.map((f, i) => `${RUN_PATCH_COLUMNS[f]} = $${i + 2}`);
  sets.push('updated_at = now()');
  // The run row names its last step from now on; a cursor given here wins over that step's.
  sets.push(...pinRunToLog(t, 'postgres', { cursor: !fields.includes('cursorAgent') && !fields.includes('cursorStep') }));
  const fence = fenced ? ` AND r.lease_epoch = $${fields.length + 2}` : '';
  return `UPDATE ${t.runs} AS r SET ${sets.join(', ')} WHERE r.run_id = $1${fence}`;
}

/** Newest first; ties broken by run id so pages are stable. */
export function pgListRuns(t: Tables, filter: RunFilter): BuiltQuery {
  const where: string[] = [];
  const values: unknown[] = [];
  if (filter.status !== undefined) {
    values.push(Array.isArray(filter.status) ? filter.status : [filter.status]);
    where.push(`status = ANY($${values.length}::text[])`);
  }
  if (filter.pipelineName) {
    values.push(filter.pipelineName);
    where.push(`pipeline_name = $${values.length}`);
  }
  if (filter.since) {
    values.push(filter.since);
    where.push(`updated_at >= $${values.length}`);
  }
  if (filter.parentRunId !== undefined) {
    values.push(filter.parentRunId);
    where.push(`parent_run_id = $${values.length}`);
  }
  // The filters on stored columns are pushed into both branches and still reach the runs' indexes.
  let text = `SELECT ${RUNS} FROM (${pgRunList(t)}) x`;
  if (where.length) text += ` WHERE ${where.join(' AND ')}`;
  text += ' ORDER BY updated_at DESC, run_id';
  if (filter.limit !== undefined) {
    values.push(filter.limit);
    text += ` LIMIT $${values.length}`;
  }
  return { text, values };
}
