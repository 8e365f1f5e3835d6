import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sqliteStorage } from '../../src/index';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { sqliteLedger } from './ledger';
import { defineTransactionalSuite } from './transactional-suite';

// One SQLite file per test in its own temp dir; the ledger tables live in the same file as the checkpoints.
defineTransactionalSuite({
  name: 'SQLite',
  dialect: 'sqlite',
  open() {
    const dir = mkdtempSync(join(tmpdir(), 'waypoint-effects-'));
    const path = join(dir, 'waypoint.db');
    const ledger = sqliteLedger(path);
    const siblings: TypeOrmCheckpointStore[] = [];
    return Promise.resolve({
      ledger,
      storage: () => sqliteStorage({ path }),
      storeWithEntities: (entities) => new TypeOrmCheckpointStore({ type: 'sqlite', path, entities }),
      sibling: async () => {
        const store = new TypeOrmCheckpointStore({ type: 'sqlite', path });
        siblings.push(store);
        await store.init();
        return store;
      },
      dispose: async () => {
        await Promise.all(siblings.map((s) => s.close()));
        await ledger.close();
        rmSync(dir, { recursive: true, force: true });
      },
    });
  },
});
