import { postgresStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { liveOutputSuite } from './live-output-suite';

const schema = schemaFor('live output, the writing side, on PostgreSQL');
liveOutputSuite(
  'PostgreSQL',
  () => postgresStorage({ url: PG_TEST_URL, schema, poolSize: 4 }),
  () => dropSchema(schema),
  true,
);
