import { Client } from 'pg';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { defineCliSuite } from './cli-suite';
import { flipped } from './cli-harness';

// One schema for the suite, named from its name (a killed run leaves a schema the next run drops first).
defineCliSuite({
  name: 'PostgreSQL',
  async open() {
    const schema = schemaFor('cli: PostgreSQL suite');
    await dropSchema(schema);
    return {
      storeUrl: `${PG_TEST_URL}?schema=${schema}`,
      workerEnv: { WAYPOINT_PG_URL: PG_TEST_URL, WAYPOINT_PG_SCHEMA: schema, WAYPOINT_DB: undefined },
      async flipByte(runId, sequence) {
        const client = new Client({ connectionString: PG_TEST_URL });
        await client.connect();
        try {
          const table = `"${schema}".waypoint_steps`;
          const { rows } = await client.query<{ output: string }>(`SELECT output FROM ${table} WHERE run_id = $1 AND sequence = $2`, [runId, sequence]);
          await client.query(`UPDATE ${table} SET output = $1 WHERE run_id = $2 AND sequence = $3`, [flipped(rows[0].output), runId, sequence]);
        } finally {
          await client.end();
        }
      },
      dispose: () => dropSchema(schema),
    };
  },
});
