import { postgresStorage } from '../../src/index';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { httpSuite } from './http-suite';

httpSuite('PostgreSQL', async () => {
  const schema = schemaFor('http handler suite: postgres');
  await dropSchema(schema);
  return { modules: () => [postgresStorage({ url: PG_TEST_URL, schema })], dispose: () => dropSchema(schema) };
});
