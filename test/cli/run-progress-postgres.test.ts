import { postgresStorage } from '../../src/index';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { defineProgressSuite } from './run-progress-suite';

defineProgressSuite('PostgreSQL', async () => {
  const schema = schemaFor('cli: run progress suite');
  await dropSchema(schema);
  return { storage: () => postgresStorage({ url: PG_TEST_URL, schema }), storeUrl: `${PG_TEST_URL}?schema=${schema}`, dispose: () => dropSchema(schema) };
});
