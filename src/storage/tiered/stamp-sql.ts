import { type Tables, derivedRunColumns } from '../sql/sql';

/**
 * The PostgreSQL side of a cached checkpoint load: the run row plus the sequence and checkpoint id of
 * the run's first and last step rows, in one statement (one snapshot, two index probes on the
 * (run_id, sequence) primary key, no step payloads). $1 run_id. No row when the run does not exist. The
 * run's live sequence, cursor and updatedAt come from its last step row, as every read of the SQL store
 * takes them (schema V5: appends no longer rewrite the run row).
 *
 * @example
 * pgStepLogStamp(tableNames({ schema: 'wp', prefix: 'waypoint_' }))
 */
export function pgStepLogStamp(t: Tables): string {
  return `SELECT ${derivedRunColumns('r', 'l')},
  f.sequence AS first_step_sequence, f.checkpoint_id AS first_step_checkpoint,
  l.sequence AS last_step_sequence, l.checkpoint_id AS last_step_checkpoint
FROM ${t.runs} r
LEFT JOIN LATERAL (SELECT sequence, checkpoint_id FROM ${t.steps} s WHERE s.run_id = r.run_id ORDER BY s.sequence LIMIT 1) f ON true
LEFT JOIN LATERAL (SELECT sequence, checkpoint_id, cursor_agent, cursor_step, completed_at FROM ${t.steps} s WHERE s.run_id = r.run_id ORDER BY s.sequence DESC LIMIT 1) l ON true
WHERE r.run_id = $1`;
}

/**
 * The checkpoint id of one step row ($1 run_id, $2 sequence): what write-behind compares two copies of a
 * run by (see tier-link.ts). No row when PostgreSQL has none there.
 *
 * @example
 * pgCheckpointAt(tableNames({ schema: 'wp', prefix: 'waypoint_' }))
 */
export function pgCheckpointAt(t: Tables): string {
  return `SELECT sequence, checkpoint_id FROM ${t.steps} WHERE run_id = $1 AND sequence = $2`;
}
