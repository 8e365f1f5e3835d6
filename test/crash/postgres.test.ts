import { postgresStorage } from '../../src/index';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { defineCrashSuite } from './crash-suite';

// One schema per test, named from the test's name (a run killed mid-test leaves a schema the next run
// drops first), dropped afterwards. Workers and the reading test process all use it.
defineCrashSuite({
  name: 'PostgreSQL',
  async open(testName) {
    const schema = schemaFor(`crash: ${testName}`);
    await dropSchema(schema);
    return {
      env: { WAYPOINT_PG_URL: PG_TEST_URL, WAYPOINT_PG_SCHEMA: schema, WAYPOINT_DB: undefined },
      storage: () => postgresStorage({ url: PG_TEST_URL, schema }),
      dispose: () => dropSchema(schema),
    };
  },
});
