import { postgresStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { durabilityAsyncSuite } from './durability-async-suite';

const schema = schemaFor('durability async on PostgreSQL');
durabilityAsyncSuite(
  'PostgreSQL',
  () => postgresStorage({ url: PG_TEST_URL, schema, poolSize: 4 }),
  () => dropSchema(schema),
);
