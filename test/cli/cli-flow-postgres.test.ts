import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { defineCliFlowSuite } from './cli-flow-suite';

defineCliFlowSuite('PostgreSQL', async () => {
  const schema = schemaFor('cli: control-flow suite');
  await dropSchema(schema);
  return { storeUrl: `${PG_TEST_URL}?schema=${schema}`, dispose: () => dropSchema(schema) };
});
