import { join } from 'node:path';
import { postgresStorage, sqliteStorage } from '../../src/index';
import { postgresLedger, sqliteLedger } from '../effects/ledger';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import type { EffectsBackend } from './effects-harness';

/** One SQLite file (checkpoints and the application's ledger side by side) in the bench's temp dir. */
export const SQLITE_EFFECTS: EffectsBackend = {
  name: 'SQLite',
  open(_label, dir) {
    const path = join(dir, 'waypoint.db');
    const ledger = sqliteLedger(path);
    return Promise.resolve({
      env: { EFFECTS_DB: path, EFFECTS_PG_URL: undefined, EFFECTS_PG_SCHEMA: undefined },
      ledger,
      storage: () => sqliteStorage({ path }),
      dispose: () => ledger.close(),
    });
  },
};

/** One PostgreSQL schema per bench, named from its label, dropped before (leftovers) and after. */
export const POSTGRES_EFFECTS: EffectsBackend = {
  name: 'PostgreSQL',
  async open(label) {
    const schema = schemaFor(label);
    await dropSchema(schema);
    const ledger = await postgresLedger(PG_TEST_URL, schema);
    return {
      env: { EFFECTS_PG_URL: PG_TEST_URL, EFFECTS_PG_SCHEMA: schema, EFFECTS_DB: undefined },
      ledger,
      storage: () => postgresStorage({ url: PG_TEST_URL, schema, poolSize: 4 }),
      dispose: async () => {
        await ledger.close();
        await dropSchema(schema);
      },
    };
  },
};
