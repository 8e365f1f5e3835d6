import { postgresStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { defineRunStreamSuite } from './run-stream-suite';

/** waypoint.stream on PostgreSQL: a schema of its own, dropped afterwards. */
defineRunStreamSuite(async () => {
  const schema = schemaFor('run-stream-postgres');
  await dropSchema(schema);
  return { name: 'postgres', modules: () => [postgresStorage({ url: PG_TEST_URL, schema, poolSize: 2 })], child: { kind: 'postgres', schema }, dispose: () => dropSchema(schema) };
});
