import type { RunFilter } from '../../contract/checkpoint-store';
import type { SqliteSynchronous } from './options';
import {
  type RunPatchField,
  type Tables,
  OPERATION_COLUMNS,
  OPERATION_STATES,
  RUN_COLUMNS,
  RUN_PATCH_COLUMNS,
  RUN_STATUSES,
  STEP_COLUMNS,
  STEP_CURSOR_COLUMNS,
  STEP_STATUSES,
  columnList,
  derivedRunColumns,
  pinRunToLog,
  quoteIdent,
  sqlStringList,
} from './sql';

/**
 * SQLite SQL text, with named parameters (`@name`, bound from an object by better-sqlite3).
 * Timestamps are INTEGER milliseconds since the epoch (exact Date round trip, cheap comparisons);
 * booleans are 0/1. Tables are STRICT so a wrong type is refused instead of stored. A fenced write runs
 * as UPDATE ... WHERE lease_epoch = @epoch inside one transaction: 0 changes means rejected. A step append
 * (schema V5, issue 22) is one fenced INSERT ... SELECT, plus a run-row UPDATE only when it changes the
 * status or resume hint; readers derive the live sequence, cursor and updatedAt from the last step row
 * (`derivedRunColumns`).
 */

/** Connection pragmas, in order. WAL lets readers run beside the writer; busy_timeout waits out other writers. */
export function sqlitePragmas(options: { synchronous: SqliteSynchronous; busyTimeoutMs: number }): string[] {
  return ['journal_mode = WAL', `synchronous = ${options.synchronous}`, `busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs))}`];
}

/** Takes the database write lock at once (not at the first write), so two migrating processes serialize. */
export const SQLITE_BEGIN_IMMEDIATE = 'BEGIN IMMEDIATE';

export function sqliteSchemaV1(t: Tables): string[] {
  return [
    `CREATE TABLE ${t.runs} (
  run_id TEXT PRIMARY KEY NOT NULL,
  pipeline_name TEXT NOT NULL,
  pipeline_version TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN (${sqlStringList(RUN_STATUSES)})),
  cursor_agent INTEGER NOT NULL DEFAULT 0,
  cursor_step INTEGER NOT NULL DEFAULT 0,
  last_sequence INTEGER NOT NULL DEFAULT 0,
  input TEXT NOT NULL,
  metadata TEXT NOT NULL,
  lease_owner TEXT,
  lease_epoch INTEGER NOT NULL DEFAULT 0,
  lease_expires_at INTEGER,
  error TEXT,
  resume_hint TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT`,
    `CREATE INDEX ${quoteIdent(`${t.raw.runs}_status_updated_idx`)} ON ${t.runs} (status, updated_at)`,
    `CREATE INDEX ${quoteIdent(`${t.raw.runs}_pipeline_idx`)} ON ${t.runs} (pipeline_name)`,
    `CREATE TABLE ${t.steps} (
  run_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  checkpoint_id TEXT NOT NULL,
  agent_index INTEGER NOT NULL,
  agent_id TEXT NOT NULL,
  step_index INTEGER NOT NULL,
  step_name TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN (${sqlStringList(STEP_STATUSES)})),
  output TEXT NOT NULL,
  memory TEXT,
  idempotency_key TEXT NOT NULL,
  side_effects_committed INTEGER NOT NULL CHECK (side_effects_committed IN (0, 1)),
  started_at INTEGER NOT NULL,
  completed_at INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  sha256 TEXT NOT NULL,
  PRIMARY KEY (run_id, sequence)
) STRICT`,
    `CREATE TABLE ${t.operations} (
  operation_key TEXT PRIMARY KEY NOT NULL,
  run_id TEXT NOT NULL,
  step_key TEXT NOT NULL,
  name TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN (${sqlStringList(OPERATION_STATES)})),
  result TEXT,
  error TEXT,
  attempts INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT`,
    `CREATE INDEX ${quoteIdent(`${t.raw.operations}_run_idx`)} ON ${t.operations} (run_id)`,
  ];
}

export function sqliteSchemaV1Down(t: Tables): string[] {
  return [`DROP TABLE ${t.operations}`, `DROP TABLE ${t.steps}`, `DROP TABLE ${t.runs}`];
}

/**
 * V4: control flow. A step row's `path` and a run's `parent_run_id`, both nullable: rows written before
 * read back as null, and adding a nullable column without a default rewrites no existing row.
 */
export function sqliteControlFlowV4(t: Tables): string[] {
  return [
    `ALTER TABLE ${t.steps} ADD COLUMN path TEXT`,
    `ALTER TABLE ${t.runs} ADD COLUMN parent_run_id TEXT`,
    `CREATE INDEX ${quoteIdent(`${t.raw.runs}_parent_idx`)} ON ${t.runs} (parent_run_id)`,
  ];
}

export function sqliteControlFlowV4Down(t: Tables): string[] {
  const index = t.schema ? `${t.schema}.${quoteIdent(`${t.raw.runs}_parent_idx`)}` : quoteIdent(`${t.raw.runs}_parent_idx`);
  return [`DROP INDEX ${index}`, `ALTER TABLE ${t.runs} DROP COLUMN parent_run_id`, `ALTER TABLE ${t.steps} DROP COLUMN path`];
}

/** V5: the run's cursor after each step on the step row (see `pgStepCursorV5`). Adds nullable columns: no row rewritten. */
export function sqliteStepCursorV5(t: Tables): string[] {
  return [`ALTER TABLE ${t.steps} ADD COLUMN cursor_agent INTEGER`, `ALTER TABLE ${t.steps} ADD COLUMN cursor_step INTEGER`];
}

export function sqliteStepCursorV5Down(t: Tables): string[] {
  return [`ALTER TABLE ${t.steps} DROP COLUMN cursor_step`, `ALTER TABLE ${t.steps} DROP COLUMN cursor_agent`];
}

const RUNS = columnList(RUN_COLUMNS);
const STEPS = columnList(STEP_COLUMNS);
const OPS = columnList(OPERATION_COLUMNS);
const named = (columns: readonly string[]) => columns.map((c) => `@${c}`).join(', ');
const STEP_INSERT = `${columnList([...STEP_COLUMNS, ...STEP_CURSOR_COLUMNS])}`;

/** The runs as read (alias `r`), with the live values derived from their last step row `l` (a primary-key probe). */
export function sqliteRunRead(t: Tables): string {
  return `SELECT ${derivedRunColumns('r', 'l')} FROM ${t.runs} r
LEFT JOIN ${t.steps} l ON r.status = 'running' AND l.run_id = r.run_id AND l.sequence = (SELECT max(sequence) FROM ${t.steps} WHERE run_id = r.run_id)`;
}

/** The fixed statements of a store; the store prepares each once and reuses it. */
export function sqliteStatements(t: Tables) {
  return {
    /** @run_id @pipeline_name @pipeline_version @input @metadata @now @parent_run_id. changes = 1 when created. */
    createRun: `INSERT INTO ${t.runs} (${RUNS})
VALUES (@run_id, @pipeline_name, @pipeline_version, 'running', 0, 0, 0, @input, @metadata, NULL, 0, NULL, NULL, NULL, @now, @now, @parent_run_id)
ON CONFLICT (run_id) DO NOTHING`,
    getRun: `${sqliteRunRead(t)} WHERE r.run_id = @run_id`,
    /** @run_id @from @to (inclusive). Without bounds, every step: loadRun uses it too. */
    listSteps: `SELECT ${STEPS} FROM ${t.steps} WHERE run_id = @run_id AND sequence >= @from AND sequence <= @to ORDER BY sequence`,
    /**
     * The hot path: the step row with the cursor after it, inserted only while the fence holds and the
     * sequence follows the last step row. 0 changes means rejected.
     */
    appendStep: `INSERT INTO ${t.steps} (${STEP_INSERT})
SELECT ${named(STEP_COLUMNS)}, @cursor_agent, @cursor_step FROM ${t.runs}
WHERE run_id = @run_id AND lease_epoch = @epoch AND @sequence = COALESCE((SELECT max(sequence) FROM ${t.steps} WHERE run_id = @run_id), 0) + 1`,
    /**
     * The steady append, tried first when the run stays running: `appendStep` that also requires the
     * stored run to be running with the same hint, so no run-row statement follows. 0 changes: the caller
     * runs `appendStep` and `transitionRun` (a transition, or a stale fence or sequence).
     */
    appendSteady: `INSERT INTO ${t.steps} (${STEP_INSERT})
SELECT ${named(STEP_COLUMNS)}, @cursor_agent, @cursor_step FROM ${t.runs}
WHERE run_id = @run_id AND lease_epoch = @epoch AND status = 'running' AND resume_hint IS @resume_hint
  AND @sequence = COALESCE((SELECT max(sequence) FROM ${t.steps} WHERE run_id = @run_id), 0) + 1`,
    /** After an applied append, in the same transaction: the run row, unless the run stays running with the same hint. */
    transitionRun: `UPDATE ${t.runs}
SET status = @status, resume_hint = @resume_hint, last_sequence = @sequence, cursor_agent = @cursor_agent, cursor_step = @cursor_step, updated_at = @now
WHERE run_id = @run_id AND NOT (status = 'running' AND @status = 'running' AND resume_hint IS @resume_hint)`,
    /** A step row as given (retention's base row), unfenced. */
    insertStep: `INSERT INTO ${t.steps} (${STEP_INSERT}) VALUES (${named(STEP_COLUMNS)}, @cursor_agent, @cursor_step)`,
    /** @run_id @sequence: the cursor stored with that step row (kept when retention replaces it). */
    stepCursor: `SELECT cursor_agent, cursor_step FROM ${t.steps} WHERE run_id = @run_id AND sequence = @sequence`,
    /** @run_id @owner @now @expires. */
    acquireLease: `UPDATE ${t.runs} SET lease_owner = @owner, lease_epoch = lease_epoch + 1, lease_expires_at = @expires
WHERE run_id = @run_id
  AND (lease_owner IS NULL OR lease_owner = @owner OR lease_owner = @dead OR lease_expires_at IS NULL OR lease_expires_at <= @now)
RETURNING lease_epoch, lease_expires_at`,
    /** @run_id @owner @epoch @expires (null frees the lease; the epoch stays, never reused). 0 changes: not ours. */
    setLeaseExpiry: `UPDATE ${t.runs} SET lease_owner = CASE WHEN @expires IS NULL THEN NULL ELSE lease_owner END, lease_expires_at = @expires
WHERE run_id = @run_id AND lease_owner = @owner AND lease_epoch = @epoch`,
    /** @run_id @epoch: one row while the fence holds. */
    fence: `SELECT 1 AS ok FROM ${t.runs} WHERE run_id = @run_id AND lease_epoch = @epoch`,
    /** @run_id: one row when the run exists. */
    runExists: `SELECT 1 AS ok FROM ${t.runs} WHERE run_id = @run_id`,
    getOperation: `SELECT ${OPS} FROM ${t.operations} WHERE operation_key = @operation_key`,
    /** Returns no row when the operation is already committed (it is then left untouched). */
    beginOperation: `INSERT INTO ${t.operations} AS o (${OPS})
VALUES (@operation_key, @run_id, @step_key, @name, 'started', NULL, NULL, 1, @now, @now)
ON CONFLICT (operation_key) DO UPDATE SET state = 'started', attempts = o.attempts + 1, updated_at = @now
WHERE o.state <> 'committed'
RETURNING ${OPS}`,
    commitOperation: `UPDATE ${t.operations} SET state = 'committed', result = @result, error = NULL, updated_at = @now
WHERE operation_key = @operation_key AND state <> 'committed'`,
    failOperation: `UPDATE ${t.operations} SET state = 'failed', error = @error, updated_at = @now
WHERE operation_key = @operation_key AND state <> 'committed'`,
    listOperations: `SELECT ${OPS} FROM ${t.operations} WHERE run_id = @run_id ORDER BY created_at, operation_key`,
    /** writeOperation's insert-if-absent (changes = 0 when the key exists; it is then left unchanged). */
    insertOperation: `INSERT INTO ${t.operations} (${OPS})
VALUES (@operation_key, @run_id, @step_key, @name, @state, @result, @error, @attempts, @now, @now)
ON CONFLICT (operation_key) DO NOTHING`,
    /** writeOperation under a fence (checked first, in the same transaction): a committed record is left as it is. */
    upsertOperation: `INSERT INTO ${t.operations} AS o (${OPS})
VALUES (@operation_key, @run_id, @step_key, @name, @state, @result, @error, @attempts, @now, @now)
ON CONFLICT (operation_key) DO UPDATE SET step_key = excluded.step_key, name = excluded.name, state = excluded.state,
  result = excluded.result, error = excluded.error, attempts = excluded.attempts, updated_at = excluded.updated_at
WHERE o.state <> 'committed'`,
    /** @run_id @resume_hint @now. Cancels a non-terminal run and fences its executor out (epoch + 1). */
    cancelRun: `UPDATE ${t.runs} AS r
SET status = 'cancelled', resume_hint = @resume_hint, lease_owner = NULL, lease_expires_at = NULL,
    lease_epoch = r.lease_epoch + 1, updated_at = @now, ${pinRunToLog(t, 'sqlite', { cursor: true }).join(', ')}
WHERE r.run_id = @run_id AND r.status NOT IN ('completed', 'cancelled')`,
    /** replaceSteps, with stepCursor and insertStep in the same transaction. @run_id @sequence. */
    hasStepsBefore: `SELECT 1 AS found FROM ${t.steps} WHERE run_id = @run_id AND sequence < @sequence LIMIT 1`,
    /** @run_id @from @to (inclusive). */
    deleteStepRange: `DELETE FROM ${t.steps} WHERE run_id = @run_id AND sequence >= @from AND sequence <= @to`,
    /**
     * After the range is replaced, for a change that moves the log's end. @run_id @cursor_agent @cursor_step
     * @now. last_sequence becomes the last step kept, so the run row's cursor is the one read.
     */
    rewindRun: `UPDATE ${t.runs}
SET cursor_agent = @cursor_agent, cursor_step = @cursor_step, updated_at = @now,
    last_sequence = COALESCE((SELECT max(sequence) FROM ${t.steps} WHERE run_id = @run_id), 0)
WHERE run_id = @run_id`,
    deleteSteps: `DELETE FROM ${t.steps} WHERE run_id = @run_id`,
    deleteOperations: `DELETE FROM ${t.operations} WHERE run_id = @run_id`,
    deleteRun: `DELETE FROM ${t.runs} WHERE run_id = @run_id`,
    /**
     * rewritePayloads: one compare-and-swap each, all in one transaction; changes = 1 when applied.
     * @run_id @from @to (+ @sequence, @operation_key). updated_at stays: listings keep their order.
     */
    swapInput: `UPDATE ${t.runs} SET input = @to WHERE run_id = @run_id AND input = @from`,
    swapRunError: `UPDATE ${t.runs} SET error = @to WHERE run_id = @run_id AND error = @from`,
    swapStepOutput: `UPDATE ${t.steps} SET output = @to WHERE run_id = @run_id AND sequence = @sequence AND output = @from`,
    swapStepMemory: `UPDATE ${t.steps} SET memory = @to WHERE run_id = @run_id AND sequence = @sequence AND memory = @from`,
    swapOperationResult: `UPDATE ${t.operations} SET result = @to WHERE operation_key = @operation_key AND run_id = @run_id AND result = @from`,
    swapOperationError: `UPDATE ${t.operations} SET error = @to WHERE operation_key = @operation_key AND run_id = @run_id AND error = @from`,
    /**
     * One attempt of a transactional side effect, inside the step's transaction (fenced by its
     * appendStep). @operation_key @run_id @step_key @name @state @result @error @now. No row back when
     * the operation is already committed.
     */
    recordOperation: `INSERT INTO ${t.operations} AS o (${OPS})
VALUES (@operation_key, @run_id, @step_key, @name, @state, @result, @error, 1, @now, @now)
ON CONFLICT (operation_key) DO UPDATE SET state = excluded.state, result = excluded.result, error = excluded.error,
  attempts = o.attempts + 1, updated_at = @now
WHERE o.state <> 'committed'
RETURNING ${OPS}`,
  };
}

export type SqliteStatementName = keyof ReturnType<typeof sqliteStatements>;

/** Bound as `{ run_id, <patch columns>, now, epoch }`. */
export function sqliteUpdateRun(t: Tables, fields: readonly RunPatchField[], fenced: boolean): string {
  const sets = fields.map((f) => `${RUN_PATCH_COLUMNS[f]} = @${RUN_PATCH_COLUMNS[f]}`);
  sets.push('updated_at = @now');
  // The run row names its last step from now on; a cursor given here wins over that step's.
  sets.push(...pinRunToLog(t, 'sqlite', { cursor: !fields.includes('cursorAgent') && !fields.includes('cursorStep') }));
  return `UPDATE ${t.runs} AS r SET ${sets.join(', ')} WHERE r.run_id = @run_id${fenced ? ' AND r.lease_epoch = @epoch' : ''}`;
}

/**
 * Newest first, ties by run id. Bound as `{ status0.., pipeline_name, since (ms), parent_run_id, limit }`; only the
 * filters present appear in the text, so the store caches one statement per filter shape.
 */
export function sqliteListRuns(t: Tables, filter: RunFilter): { text: string; params: Record<string, unknown> } {
  const where: string[] = [];
  const params: Record<string, unknown> = {};
  if (filter.status !== undefined) {
    const statuses = Array.isArray(filter.status) ? filter.status : [filter.status];
    statuses.forEach((s, i) => (params[`status${i}`] = s));
    where.push(`status IN (${statuses.map((_, i) => `@status${i}`).join(', ')})`);
  }
  if (filter.pipelineName) {
    params.pipeline_name = filter.pipelineName;
    where.push('pipeline_name = @pipeline_name');
  }
  if (filter.since) {
    params.since = filter.since.getTime();
    where.push('updated_at >= @since');
  }
  if (filter.parentRunId !== undefined) {
    params.parent_run_id = filter.parentRunId;
    where.push('parent_run_id = @parent_run_id');
  }
  let text = `SELECT ${RUNS} FROM (${sqliteRunRead(t)}) x`;
  if (where.length) text += ` WHERE ${where.join(' AND ')}`;
  text += ' ORDER BY updated_at DESC, run_id';
  if (filter.limit !== undefined) {
    params.limit = filter.limit;
    text += ' LIMIT @limit';
  }
  return { text, params };
}
