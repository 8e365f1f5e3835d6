import { join } from 'node:path';
import { sqliteStorage } from '../../src/index';
import { defineCrashSuite } from './crash-suite';

// One SQLite file per test, inside the test's temp dir (removed with it).
defineCrashSuite({
  name: 'SQLite',
  open(_testName, dir) {
    const path = join(dir, 'waypoint.db');
    return Promise.resolve({
      env: { WAYPOINT_DB: path, WAYPOINT_PG_URL: undefined, WAYPOINT_PG_SCHEMA: undefined },
      storage: () => sqliteStorage({ path }),
      dispose: async () => {},
    });
  },
});
