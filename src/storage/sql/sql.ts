/**
 * What the SQL builders of both dialects share: table names and column lists. Every builder is a pure
 * function of its arguments (no I/O, no driver), so the SQL text is unit-tested as strings
 * (test/storage/sql-builders.test.ts).
 */

export type Dialect = 'sqlite' | 'postgres';

/** Quoted, (schema-)qualified table names, ready to interpolate into SQL text. */
export interface Tables {
  runs: string;
  steps: string;
  operations: string;
  /** The runs' output stream events (migration V6, issue 37). */
  events: string;
  /** The runs' output stream batches, one row per append (migration V7). */
  batches: string;
  /** Unquoted table names, for index names (an index lives in its table's schema, so it is never qualified). */
  raw: { runs: string; steps: string; operations: string; events: string; batches: string };
  /** Unquoted name of TypeORM's migrations table (TypeORM qualifies and quotes it itself). */
  migrations: string;
  /** Quoted schema, or null for the connection's default (search_path / SQLite main). */
  schema: string | null;
}

/**
 * @example
 * tableNames({ schema: 'wp', prefix: 'waypoint_' }).runs // '"wp"."waypoint_runs"'
 */
export function tableNames(options: { schema?: string; prefix: string }): Tables {
  const schema = options.schema ? quoteIdent(options.schema) : null;
  const qualify = (name: string) => (schema ? `${schema}.${quoteIdent(name)}` : quoteIdent(name));
  const raw = {
    runs: `${options.prefix}runs`,
    steps: `${options.prefix}steps`,
    operations: `${options.prefix}operations`,
    events: `${options.prefix}events`,
    batches: `${options.prefix}stream_batches`,
  };
  return {
    runs: qualify(raw.runs),
    steps: qualify(raw.steps),
    operations: qualify(raw.operations),
    events: qualify(raw.events),
    batches: qualify(raw.batches),
    raw,
    migrations: `${options.prefix}migrations`,
    schema,
  };
}

/** Double-quotes an identifier (options are validated to plain identifiers, this guards the rest). */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** Columns of `waypoint_runs`, in the order every SELECT returns them. */
export const RUN_COLUMNS = [
  'run_id',
  'pipeline_name',
  'pipeline_version',
  'status',
  'cursor_agent',
  'cursor_step',
  'last_sequence',
  'input',
  'metadata',
  'lease_owner',
  'lease_epoch',
  'lease_expires_at',
  'error',
  'resume_hint',
  'created_at',
  'updated_at',
  /** Added by migration V4 (null for a top-level run and for every run written before it). */
  'parent_run_id',
] as const;

/** Columns of `waypoint_steps`; also the order of the values of a step insert. */
export const STEP_COLUMNS = [
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
  /** Added by migration V4 (null for a straight-line step and for every row written before it). */
  'path',
] as const;

/**
 * Columns of `waypoint_steps` that are not part of a `StepRecord` (migration V5): the run's cursor after the
 * step, as its append gave it. Null on rows written before V5. See `derivedRunColumns`.
 */
export const STEP_CURSOR_COLUMNS = ['cursor_agent', 'cursor_step'] as const;

/**
 * The run row as read (issue 22, schema V5). An append no longer rewrites the run row: it inserts the step
 * row (with the cursor after it) and leaves the run row alone while the run stays `running` with the same
 * resume hint; any other append, and every other write of the run row, brings the row up to date. So only
 * a running run can have steps newer than its row, and the dialects join `l` for running runs only.
 * So `last_sequence`, the cursor and `updated_at` of the run row are those of its last write (creation,
 * a transition, a patch, a truncation), and the live values come from the run's last step row `l` when it
 * is newer than that write (`l.sequence > r.last_sequence`):
 * - last_sequence: the last step's sequence;
 * - cursor: the cursor stored with the last step (the run row's on rows written before V5, which have none);
 * - updated_at: the later of the run row's and the last step's completion time.
 * Rows written before V5 always have `r.last_sequence` equal to their last step's (every append wrote it),
 * so they read as they did. `CASE` rather than GREATEST: SQLite's max(a, NULL) is NULL.
 *
 * `r` is the alias of the run row, `l` the alias of its last step row (joined by the dialect, absent
 * columns NULL); `as` names each output column.
 */
export function derivedRunColumns(r: string, l: string, as: (column: string) => string = (c) => c): string {
  const newer = `${l}.sequence > ${r}.last_sequence`;
  return RUN_COLUMNS.map((c) => {
    let expression: string;
    switch (c) {
      case 'last_sequence':
        expression = `CASE WHEN ${newer} THEN ${l}.sequence ELSE ${r}.last_sequence END`;
        break;
      case 'cursor_agent':
      case 'cursor_step':
        expression = `CASE WHEN ${newer} AND ${l}.${c} IS NOT NULL THEN ${l}.${c} ELSE ${r}.${c} END`;
        break;
      case 'updated_at':
        expression = `CASE WHEN ${newer} AND ${l}.completed_at > ${r}.updated_at THEN ${l}.completed_at ELSE ${r}.updated_at END`;
        break;
      default:
        expression = `${r}.${c}`;
    }
    return `${expression} AS ${as(c)}`;
  }).join(', ');
}

/**
 * SET clauses that write the derived values into the run row `r` (see `derivedRunColumns`): every write of
 * the run row outside an append (a patch, a cancel) pins `last_sequence` to its last step and takes that
 * step's cursor, unless the write sets the cursor itself. So a run at rest (paused, waiting, failed,
 * completed, cancelled) names its last row in its own row, and a deleted tail still shows as a gap when
 * the run is loaded; never lowered here (only a truncation lowers it).
 */
export function pinRunToLog(t: Tables, dialect: Dialect, options: { cursor: boolean }): string[] {
  const greatest = dialect === 'postgres' ? 'GREATEST' : 'max';
  const sets = [`last_sequence = ${greatest}(r.last_sequence, COALESCE((SELECT max(s.sequence) FROM ${t.steps} s WHERE s.run_id = r.run_id), 0))`];
  if (options.cursor)
    for (const c of STEP_CURSOR_COLUMNS)
      sets.push(`${c} = COALESCE((SELECT s.${c} FROM ${t.steps} s WHERE s.run_id = r.run_id AND s.sequence > r.last_sequence ORDER BY s.sequence DESC LIMIT 1), r.${c})`);
  return sets;
}

export const OPERATION_COLUMNS = ['operation_key', 'run_id', 'step_key', 'name', 'state', 'result', 'error', 'attempts', 'created_at', 'updated_at'] as const;

export type RunColumn = (typeof RUN_COLUMNS)[number];
export type StepColumn = (typeof STEP_COLUMNS)[number];
export type OperationColumn = (typeof OPERATION_COLUMNS)[number];

/** Run columns a `RunPatch` may set, keyed by patch field, in a fixed order so equal patches build equal SQL. */
export const RUN_PATCH_COLUMNS = {
  status: 'status',
  pipelineVersion: 'pipeline_version',
  cursorAgent: 'cursor_agent',
  cursorStep: 'cursor_step',
  error: 'error',
  resumeHint: 'resume_hint',
} as const;

export type RunPatchField = keyof typeof RUN_PATCH_COLUMNS;

/** `a.x, a.y` (or `x, y` without alias). */
export function columnList(columns: readonly string[], alias?: string): string {
  return columns.map((c) => (alias ? `${alias}.${c}` : c)).join(', ');
}

/** A query text with its positional values, for the statements whose shape depends on the call. */
export interface BuiltQuery {
  text: string;
  values: unknown[];
}

/** Largest sequence bound accepted (PostgreSQL `integer`); open ranges are clamped to it. */
export const MAX_SEQUENCE = 2_147_483_647;

/** Every run status, so both dialects can CHECK the column against the contract's union. */
export const RUN_STATUSES = ['running', 'paused', 'waiting', 'completed', 'failed', 'cancelled'] as const;
export const STEP_STATUSES = ['completed', 'failed', 'skipped'] as const;
export const OPERATION_STATES = ['started', 'committed', 'failed'] as const;

/** `'a', 'b'` for a CHECK (x IN (...)) constraint. */
export function sqlStringList(values: readonly string[]): string {
  return values.map((v) => `'${v.replace(/'/g, "''")}'`).join(', ');
}
