import { postgresStorage } from '../../src/index';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { postgresLedger } from './ledger';
import { defineTransactionalSuite } from './transactional-suite';

// One schema per test, named from the test's name: the store's tables and the ledger tables side by side.
defineTransactionalSuite({
  name: 'PostgreSQL',
  dialect: 'postgres',
  async open(testName) {
    const schema = schemaFor(testName);
    await dropSchema(schema);
    const ledger = await postgresLedger(PG_TEST_URL, schema);
    const siblings: TypeOrmCheckpointStore[] = [];
    return {
      ledger,
      storage: () => postgresStorage({ url: PG_TEST_URL, schema, poolSize: 4 }),
      storeWithEntities: (entities) => new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 4, entities }),
      sibling: async () => {
        const store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 2 });
        siblings.push(store);
        await store.init();
        return store;
      },
      dispose: async () => {
        await Promise.all(siblings.map((s) => s.close()));
        await ledger.close();
        await dropSchema(schema);
      },
    };
  },
});
