import { Client } from 'pg';
import { TypeOrmCheckpointStore, type CheckpointStore, type StepAppend } from '../src/index';
import { PG_TABLE, pgCreateTable } from './floors';
import { flatStepPayload } from './pipeline';

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

/**
 * WAL written per statement, as PostgreSQL's EXPLAIN (ANALYZE, WAL) counts it (the commit record left out,
 * the same for both), and the server's own execution time per statement (EXPLAIN's "Execution Time": the
 * executor only, no parse, plan, network or commit), in microseconds.
 */
export interface PgAppendWal {
  appendRecords: number;
  appendBytes: number;
  floorRecords: number;
  floorBytes: number;
  appendExecUs: number;
  floorExecUs: number;
}

/**
 * The WAL one step append writes, from PostgreSQL itself: the store's own append statement (its text and
 * values, as the hot path binds them) run `steps` times under EXPLAIN (ANALYZE, WAL) in a fresh schema,
 * beside the floor's single-row INSERT of the same 1 KB payload. The statement is the one `store.appendStep`
 * sends, prefixed with the EXPLAIN on its way to the server (`explainedAppend`). A count of work, not a timing, so the load
 * of the machine does not move it: what the append writes beyond the floor's INSERT is its own cost.
 *
 * @example
 * const wal = await pgAppendWal(url, env.pgSchema('wal'));
 * wal.appendBytes / wal.floorBytes
 */
export async function pgAppendWal(url: string, schema: string, steps = 200): Promise<PgAppendWal> {
  const store = new TypeOrmCheckpointStore({ type: 'postgres', url, schema });
  const client = new Client({ connectionString: url, application_name: 'waypoint-bench-wal' });
  await store.init();
  await client.connect();
  try {
    await store.createRun({ runId: 'wal', pipelineName: 'bench', pipelineVersion: '1.0.0', input: JSON.stringify({ subject: 'bench' }), metadata: '{"host":"bench"}' });
    const grant = await store.acquireLease('wal', 'bench', 600_000);
    if (!grant) throw new Error('pgAppendWal: no lease');
    for (const sql of pgCreateTable(schema)) await client.query(sql);
    const out = { appendRecords: 0, appendBytes: 0, floorRecords: 0, floorBytes: 0, appendExecUs: 0, floorExecUs: 0 };
    const explain = async (sql: string, values: unknown[]) => {
      const res = await client.query<{ 'QUERY PLAN': { Plan: Record<string, number>; 'Execution Time': number }[] }>({
        text: `EXPLAIN (ANALYZE, WAL, TIMING OFF, FORMAT JSON) ${sql}`,
        values,
      });
      const { Plan: plan, 'Execution Time': execMs } = res.rows[0]['QUERY PLAN'][0];
      return { records: plan['WAL Records'] ?? 0, bytes: plan['WAL Bytes'] ?? 0, execUs: execMs * 1000 };
    };
    for (let sequence = 1; sequence <= steps; sequence++) {
      const payload = flatStepPayload(1000, sequence);
      const now = new Date();
      const append: StepAppend = {
        step: {
          runId: 'wal',
          sequence,
          checkpointId: `wal-${sequence}`,
          agentIndex: 0,
          agentId: 'BenchAgent',
          stepIndex: sequence - 1,
          stepName: `s${sequence}`,
          status: 'completed',
          output: payload,
          memory: null,
          idempotencyKey: `wal/BenchAgent/s${sequence}`,
          sideEffectsCommitted: false,
          startedAt: now,
          completedAt: now,
          attempt: 1,
          sha256: 'ab'.repeat(32),
          path: null,
        },
        run: { cursorAgent: 0, cursorStep: sequence, status: 'running', resumeHint: null },
        fence: { epoch: grant.epoch },
      };
      const appended = await explainedAppend(store, append, schema);
      const floor = await explain(`INSERT INTO ${PG_TABLE(schema)} (run_id, sequence, step_name, payload) VALUES ($1, $2, $3, $4)`, ['wal', sequence, `s${sequence}`, payload]);
      out.appendRecords += appended.records / steps;
      out.appendBytes += appended.bytes / steps;
      out.floorRecords += floor.records / steps;
      out.floorBytes += floor.bytes / steps;
      out.appendExecUs += appended.execUs / steps;
      out.floorExecUs += floor.execUs / steps;
    }
    const run = await store.getRun('wal');
    if (run?.lastSequence !== steps) throw new Error(`pgAppendWal: the appends did not all apply (last sequence ${run?.lastSequence})`);
    return out;
  } finally {
    await client.end();
    await store.close();
  }
}

type ExplainPlan = { Plan: Record<string, number>; 'Execution Time': number }[];
type PgQuery = (this: Client, ...args: unknown[]) => unknown;

/**
 * `store.appendStep(append)` with the one statement it sends (the steady append, for a step that leaves
 * its run running) run under EXPLAIN (ANALYZE, WAL) on its own connection: ANALYZE executes it, so the row
 * is written as the store wrote it, and the store is told one row was (the caller checks the run's last
 * sequence at the end). Throws when the store sends anything else, or more than one statement.
 */
async function explainedAppend(store: CheckpointStore, append: StepAppend, schema: string): Promise<{ records: number; bytes: number; execUs: number }> {
  const prototype = Client.prototype as unknown as { query: PgQuery };
  const original = prototype.query;
  const sent: string[] = [];
  let plan: ExplainPlan | null = null;
  prototype.query = function (this: Client, ...args: unknown[]) {
    const { text, values } = args[0] as { text: string; values: unknown[] };
    sent.push(text);
    if (sent.length > 1 || !text.includes(`INSERT INTO "${schema}"."waypoint_steps"`)) return original.apply(this, args);
    const explained = { text: `EXPLAIN (ANALYZE, WAL, TIMING OFF, FORMAT JSON) ${text}`, values };
    const asAppended = (res: { rows: { 'QUERY PLAN': ExplainPlan }[] }) => {
      plan = res.rows[0]['QUERY PLAN'];
      return { ...res, rows: [], rowCount: 1, command: 'INSERT' };
    };
    const callback = args.find((a) => typeof a === 'function') as ((error: Error | null, res?: unknown) => void) | undefined;
    if (callback) {
      return original.call(this, explained, (error: Error | null, res: { rows: { 'QUERY PLAN': ExplainPlan }[] }) => (error ? callback(error) : callback(null, asAppended(res))));
    }
    return (original.call(this, explained) as Promise<{ rows: { 'QUERY PLAN': ExplainPlan }[] }>).then(asAppended);
  };
  try {
    await store.appendStep(append);
  } finally {
    prototype.query = original;
  }
  const explainedPlan = plan as ExplainPlan | null;
  if (!explainedPlan || sent.length !== 1) {
    throw new Error(`pgAppendWal: appendStep sent ${sent.length} statement(s), not the one steady append (${sent.map((t) => t.replace(/\s+/g, ' ').slice(0, 50)).join(' | ')})`);
  }
  const { Plan: root, 'Execution Time': execMs } = explainedPlan[0];
  return { records: root['WAL Records'] ?? 0, bytes: root['WAL Bytes'] ?? 0, execUs: execMs * 1000 };
}
