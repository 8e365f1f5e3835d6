import { Client } from 'pg';

/**
 * What PostgreSQL itself says about the bench's writes to one schema (pg_stat_user_tables): how many run
 * row updates were HOT (heap-only: no index touched) and how many indexes a non-HOT one rewrites. A
 * step append updates the run row; when that update is not HOT every index of the runs table gets a new
 * entry, per step.
 */
export interface PgWriteStats {
  stepInserts: number;
  runUpdates: number;
  runHotUpdates: number;
  runIndexes: number;
  stepIndexes: number;
}

/**
 * Reads the counters once the backends have flushed them (they do at session end: close the pool
 * first), waiting up to `timeoutMs` for `expectedStepInserts` to show.
 *
 * @example
 * await bw.waypoint.close();
 * const s = await pgWriteStats(url, schema, 2100);
 * s.runHotUpdates / s.runUpdates
 */
export async function pgWriteStats(url: string, schema: string, expectedStepInserts: number, timeoutMs = 5000): Promise<PgWriteStats> {
  const client = new Client({ connectionString: url, application_name: 'waypoint-bench-stats' });
  await client.connect();
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const { rows } = await client.query<{ relname: string; ins: string; upd: string; hot: string; indexes: string }>(
        `SELECT t.relname, t.n_tup_ins AS ins, t.n_tup_upd AS upd, t.n_tup_hot_upd AS hot,
                (SELECT count(*) FROM pg_indexes i WHERE i.schemaname = t.schemaname AND i.tablename = t.relname) AS indexes
         FROM pg_stat_user_tables t WHERE t.schemaname = $1 AND t.relname IN ('waypoint_runs', 'waypoint_steps')`,
        [schema],
      );
      const runs = rows.find((r) => r.relname === 'waypoint_runs');
      const steps = rows.find((r) => r.relname === 'waypoint_steps');
      const stats = {
        stepInserts: Number(steps?.ins ?? 0),
        runUpdates: Number(runs?.upd ?? 0),
        runHotUpdates: Number(runs?.hot ?? 0),
        runIndexes: Number(runs?.indexes ?? 0),
        stepIndexes: Number(steps?.indexes ?? 0),
      };
      if (stats.stepInserts >= expectedStepInserts || Date.now() > deadline) return stats;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  } finally {
    await client.end();
  }
}
