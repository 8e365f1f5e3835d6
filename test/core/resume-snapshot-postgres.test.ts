import { postgresStorage } from '../../src/index';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { resumeSnapshotSuite } from './resume-snapshot-suite';

const schema = schemaFor('resume snapshots of long runs on PostgreSQL');
resumeSnapshotSuite(
  'PostgreSQL',
  () => postgresStorage({ url: PG_TEST_URL, schema, poolSize: 4 }),
  () => dropSchema(schema),
);
