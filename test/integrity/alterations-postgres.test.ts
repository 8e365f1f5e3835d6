import { Client } from 'pg';
import { postgresStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { defineAlterationSuite, type RawBackend, type RawValue, type Snapshot } from './alterations-suite';

/** The alteration suite on PostgreSQL: rows altered with `pg` in a schema of the test's own. */
defineAlterationSuite(async () => {
  const schema = schemaFor('alterations-postgres');
  await dropSchema(schema);
  const client = new Client({ connectionString: PG_TEST_URL });
  await client.connect();
  const t = (table: string) => `"${schema}"."${table}"`;
  const tables = async () =>
    (await client.query<{ name: string }>(`SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`, [schema])).rows.map((r) => r.name);
  const backend: RawBackend = {
    name: 'postgres',
    storeUrl: `${PG_TEST_URL}?schema=${schema}`,
    modules: () => [postgresStorage({ url: PG_TEST_URL, schema })],
    async dump(): Promise<Snapshot> {
      const data: Record<string, string[]> = {};
      const lines: string[] = [];
      for (const table of await tables()) {
        data[table] = (await client.query<{ j: string }>(`SELECT row_to_json(r)::text AS j FROM ${t(table)} r`)).rows.map((r) => r.j).sort();
        lines.push(...data[table].map((j) => `${table} ${j}`));
      }
      return { text: lines.join('\n'), data };
    },
    async restore(snapshot: Snapshot): Promise<void> {
      const data = snapshot.data as Record<string, string[]>;
      await client.query('BEGIN');
      try {
        for (const table of await tables()) {
          await client.query(`DELETE FROM ${t(table)}`);
          const rows = data[table] ?? [];
          if (rows.length > 0) await client.query(`INSERT INTO ${t(table)} SELECT * FROM json_populate_recordset(null::${t(table)}, $1::json)`, [`[${rows.join(',')}]`]);
        }
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      }
    },
    async step(runId, sequence) {
      const { rows } = await client.query<Record<string, RawValue>>(`SELECT * FROM ${t('waypoint_steps')} WHERE run_id = $1 AND sequence = $2`, [runId, sequence]);
      if (!rows[0]) throw new Error(`no row ${runId}#${sequence}`);
      return rows[0];
    },
    async updateStep(runId, sequence, changes) {
      const columns = Object.keys(changes);
      const done = await client.query(
        `UPDATE ${t('waypoint_steps')} SET ${columns.map((c, i) => `"${c}" = $${i + 1}`).join(', ')} WHERE run_id = $${columns.length + 1} AND sequence = $${columns.length + 2}`,
        [...columns.map((c) => changes[c]), runId, sequence],
      );
      if (done.rowCount !== 1) throw new Error(`no row ${runId}#${sequence} to update`);
    },
    async deleteStep(runId, sequence) {
      await client.query(`DELETE FROM ${t('waypoint_steps')} WHERE run_id = $1 AND sequence = $2`, [runId, sequence]);
    },
    async runField(runId, column) {
      return String((await client.query<{ v: string }>(`SELECT "${column}" AS v FROM ${t('waypoint_runs')} WHERE run_id = $1`, [runId])).rows[0]?.v);
    },
    async updateRun(runId, column, value) {
      await client.query(`UPDATE ${t('waypoint_runs')} SET "${column}" = $1 WHERE run_id = $2`, [value, runId]);
    },
    async dispose() {
      await client.end();
      await dropSchema(schema);
    },
  };
  return backend;
});
