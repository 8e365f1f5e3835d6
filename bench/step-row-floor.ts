import { Client } from 'pg';
import type { BenchEnvironment } from './environment';
import { benchStepRow } from './store-floor';
import { checkStepColumns, STEP_RECORD_COLUMNS, STEP_TABLE_COLUMNS, stepColumns } from './stored-rows';
import { nextRunId } from './timed-run';

/**
 * A bound between the floor and the store's append on PostgreSQL: the step row itself (every column the
 * store writes, the values bound as the store binds them) inserted by a raw client with a bare
 * single-row INSERT into a copy of the store's steps table (its columns, checks and primary key), with no
 * fence, no sequence check and no run row. What it costs over the floor is the row's width; what the
 * store's append costs over it is the fence and the check.
 *
 * @example const row = await PgStepRowFloor.open(env); const usPerInsert = await row.batch(100, payload);
 */
export class PgStepRowFloor {
  readonly what = 'the step row, bare INSERT';
  private readonly text: string;

  private constructor(
    private readonly client: Client,
    table: string,
  ) {
    this.text = `INSERT INTO ${table} (${STEP_TABLE_COLUMNS.join(', ')}) VALUES (${STEP_TABLE_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`;
  }

  /** `stepsTable`: the store's steps table (schema-qualified, quoted), copied with its columns, checks and primary key. */
  static async open(env: BenchEnvironment, stepsTable: string): Promise<PgStepRowFloor> {
    const schema = env.pgSchema('steprow');
    const table = `"${schema}".step_rows`;
    const client = new Client({ connectionString: env.pgUrl, application_name: 'waypoint-bench-floor' });
    await client.connect();
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${table} (LIKE ${stepsTable} INCLUDING ALL)`);
    const { rows } = await client.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'step_rows' ORDER BY ordinal_position`,
      [schema],
    );
    checkStepColumns(
      rows.map((r) => r.column_name),
      `the store's steps table ${stepsTable}`,
    );
    return new PgStepRowFloor(client, table);
  }

  /** Inserts n prebuilt step rows of a fresh run, one commit each; returns µs per insert. */
  async batch(n: number, payload: string): Promise<number> {
    const runId = nextRunId('step-row');
    const rows = Array.from({ length: n }, (_, i) => {
      const row = stepColumns(benchStepRow(runId, i + 1, payload), 'postgres');
      return [...STEP_RECORD_COLUMNS.map((c) => row[c]), 0, i + 1];
    });
    const start = performance.now();
    for (const values of rows) await this.client.query({ name: 'step_row_insert', text: this.text, values });
    return ((performance.now() - start) * 1000) / n;
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}
