import { postgresStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { rowsAreTruthSuite } from './rows-are-truth-suite';

const schema = schemaFor('the rows are the truth on PostgreSQL');
rowsAreTruthSuite(
  'PostgreSQL',
  () => postgresStorage({ url: PG_TEST_URL, schema, poolSize: 4 }),
  () => dropSchema(schema),
);
