import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { dropStreams } from '../../src/index';
import { WriteBehindCheckpointStore } from '../../src/storage/tiered/write-behind-store';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { newRun } from '../helpers/store-records';
import { deleteKeysUnder, MemoryLogger, REDIS_TEST_URL } from '../lease/backends';

/**
 * The write-behind tiered store drops a run's stream (issue 37, retention): `dropStream` and
 * `dropStreams` work on it as on the other backends; the run stays.
 */
describe('tiered write-behind: dropStream', () => {
  it('drops a run stream, keeps the run, and dropStreams finds it', async () => {
    const schema = schemaFor('write-behind: drop stream');
    const prefix = `wp-test:wb-drop:${randomUUID()}:`;
    await dropSchema(schema);
    const store = new WriteBehindCheckpointStore({
      redis: { url: REDIS_TEST_URL, keyPrefix: prefix },
      postgres: { url: PG_TEST_URL, schema, poolSize: 2 },
      writeBehind: { blockMs: 20 },
      logger: new MemoryLogger(),
    });
    try {
      await store.init();
      await store.createRun(newRun('wb-drop'));
      const part = (data: string) => ({ kind: 'part' as const, step: 'a/s', attempt: 1, data });
      await store.appendEvents('wb-drop', [{ kind: 'status', status: 'running' }, part('"a"'), part('"b"')]);
      await store.appendEvents('wb-drop', [{ kind: 'status', status: 'completed' }]);
      assert.equal(await store.streamLength('wb-drop'), 4);
      assert.equal(await store.dropStream('wb-drop'), 4);
      assert.equal(await store.streamLength('wb-drop'), 0);
      assert.deepEqual(await store.readEvents('wb-drop', 0, 10), []);
      assert.ok(await store.getRun('wb-drop'), 'the run stays');

      await store.createRun(newRun('wb-done'));
      await store.appendEvents('wb-done', [part('"c"')]);
      await store.updateRun('wb-done', { status: 'completed' }, null);
      const dropped = await dropStreams(store, { olderThan: new Date(Date.now() + 60_000) });
      assert.deepEqual(
        dropped.filter((d) => d.runId === 'wb-done').map((d) => [d.runId, d.events]),
        [['wb-done', 1]],
      );
      assert.equal(await store.streamLength('wb-done'), 0);
    } finally {
      await store.close();
      await deleteKeysUnder(prefix);
      await dropSchema(schema);
    }
  });
});
