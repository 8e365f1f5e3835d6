import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sqliteStorage } from '../../src/index';
import { defineProgressSuite } from './run-progress-suite';

defineProgressSuite('SQLite', () => {
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-progress-'));
  const path = join(dir, 'progress.db');
  return Promise.resolve({
    storage: () => sqliteStorage({ path }),
    storeUrl: `sqlite:${path}`,
    dispose: () => Promise.resolve(rmSync(dir, { recursive: true, force: true })),
  });
});
