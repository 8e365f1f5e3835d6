import { postgresStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { defineValuesSuite } from './values-suite';

/** The stored-values suite on PostgreSQL: a schema of its own, dropped afterwards. */
defineValuesSuite(async () => {
  const schema = schemaFor('values-postgres');
  await dropSchema(schema);
  return { name: 'postgres', modules: () => [postgresStorage({ url: PG_TEST_URL, schema, poolSize: 2 })], dispose: () => dropSchema(schema) };
});
