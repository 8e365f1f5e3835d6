import { postgresStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { controlFlowSuite } from './control-flow-suite';

const schema = schemaFor('control flow on PostgreSQL');
controlFlowSuite(
  'PostgreSQL',
  () => postgresStorage({ url: PG_TEST_URL, schema, poolSize: 4 }),
  () => dropSchema(schema),
);
