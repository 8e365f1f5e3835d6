import { OPERATION_COLUMNS, RUN_COLUMNS, STEP_COLUMNS, STEP_CURSOR_COLUMNS, type Tables, columnList, derivedRunColumns } from './sql';

// Pieces of PostgreSQL SQL text that several statements of sql-postgres.ts share: the column lists, the
// typed parameters of a step row, the join of a run's last step and the run-row write of an append.

export const RUNS = columnList(RUN_COLUMNS);
export const STEPS = columnList(STEP_COLUMNS);
export const OPS = columnList(OPERATION_COLUMNS);
/** Step columns after (run_id, sequence): the values $8.. of an append. */
export const STEP_PAYLOAD_COLUMNS = STEP_COLUMNS.slice(2);
const STEP_PAYLOAD_CASTS: Record<string, string> = {
  agent_index: 'int',
  step_index: 'int',
  side_effects_committed: 'boolean',
  started_at: 'timestamptz',
  completed_at: 'timestamptz',
  attempt: 'int',
};

/** The arrays of `appendSteps`, in `appendStep`'s parameter order, and the names unnest gives them. */
const APPEND_ARRAY_COLUMNS: [string, string][] = [
  ['run_id', 'text'],
  ['epoch', 'int'],
  ['sequence', 'int'],
  ['cursor_agent', 'int'],
  ['cursor_step', 'int'],
  ['run_status', 'text'],
  ['resume_hint', 'text'],
  ...STEP_PAYLOAD_COLUMNS.map((c): [string, string] => [c, STEP_PAYLOAD_CASTS[c] ?? 'text']),
];
export const APPEND_ARRAY_PARAMS = APPEND_ARRAY_COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ');
export const APPEND_ARRAY_NAMES = APPEND_ARRAY_COLUMNS.map(([name]) => name).join(', ');

/** `$n::type, ...` for the step columns after (run_id, sequence), starting at `$first`. */
export function stepPayloadParams(first: number): string {
  return STEP_PAYLOAD_COLUMNS.map((c, i) => `$${i + first}::${STEP_PAYLOAD_CASTS[c] ?? 'text'}`).join(', ');
}

/** The columns an append inserts: the step record's, then the cursor after it. */
export const STEP_INSERT_COLUMNS = columnList([...STEP_COLUMNS, ...STEP_CURSOR_COLUMNS]);

/**
 * Joins the last step row of run `r` as `l` (one backward probe of the steps' primary key), for a running
 * run only: the row of any other run is exact (see `derivedRunColumns`), so a listing probes only the
 * runs in flight.
 */
export function lastStep(t: Tables, r: string): string {
  return `LEFT JOIN LATERAL (SELECT sequence, cursor_agent, cursor_step, completed_at FROM ${t.steps} WHERE run_id = ${r}.run_id AND ${r}.status = 'running' ORDER BY sequence DESC LIMIT 1) l ON true`;
}

/** The runs as read, with the live values derived from their last step (alias `r`). */
export function pgRunRead(t: Tables): string {
  return `SELECT ${derivedRunColumns('r', 'l')} FROM ${t.runs} r ${lastStep(t, 'r')}`;
}

/**
 * `pgRunRead` for listings: the running runs with their last step joined, the others (exact rows) as
 * stored, so a list of many finished runs costs no probe per run. Filters outside reach both branches.
 */
export function pgRunList(t: Tables): string {
  return `${pgRunRead(t)} WHERE r.status = 'running'
UNION ALL
SELECT ${RUN_COLUMNS.join(', ')} FROM ${t.runs} WHERE status <> 'running'`;
}

/** The sequence an append of run `runId` must have: the last step's + 1 (1 for a run without steps). */
export function nextSequence(t: Tables, runId: string): string {
  return `COALESCE((SELECT max(s.sequence) FROM ${t.steps} s WHERE s.run_id = ${runId}), 0) + 1`;
}

/**
 * The run-row write of an append, skipped only when the run stays `running` with the same hint (`f` holds
 * the row as locked): every append to or from another status writes it, so a run that is not running
 * always names its last step in its own row.
 */
export function transition(t: Tables, values: { sequence: string; cursorAgent: string; cursorStep: string; status: string; hint: string }, from: string, where: string): string {
  return `UPDATE ${t.runs} AS t
  SET status = ${values.status}, resume_hint = ${values.hint}, last_sequence = ${values.sequence}, cursor_agent = ${values.cursorAgent},
      cursor_step = ${values.cursorStep}, updated_at = now()
  FROM ${from}
  WHERE ${where} AND NOT (f.status = 'running' AND ${values.status} = 'running' AND f.resume_hint IS NOT DISTINCT FROM ${values.hint})`;
}
