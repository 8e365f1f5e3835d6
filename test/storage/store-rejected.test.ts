import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { StoreRejectedError, TOKENS, TypeOrmCheckpointStore, Waypoint, type RunStatus, type WaypointError } from '../../src/index';
import { exitCodeForError } from '../../src/cli/exit-codes';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { newRun } from '../helpers/store-records';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';

/**
 * STORE_UNAVAILABLE means "unreachable, retry later"; a store that was reached and refused the value or
 * statement (PostgreSQL's encoding error for a NUL, a CHECK constraint) is STORE_REJECTED, whose message
 * says retrying will not help. Real errors from the real servers.
 */

const rejected = (pattern: RegExp) => (err: WaypointError) => {
  assert.equal(err.code, 'STORE_REJECTED', err.message);
  assert.match(err.message, /refused/);
  assert.match(err.message, /Retrying will not help/);
  assert.match(err.message, pattern);
  return true;
};

describe('store errors: rejected vs unavailable', () => {
  it('PostgreSQL: a NUL in a value is STORE_REJECTED from the store; signal() refuses a NUL in its name before the store', async () => {
    const schema = schemaFor('store-rejected nul');
    await dropSchema(schema);
    const store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema });
    try {
      await store.init();
      await assert.rejects(store.createRun(newRun('r1', { pipelineName: 'p\u0000q' })), rejected(/0x00/));
      await assert.rejects(store.getRun('a\u0000b'), rejected(/0x00/));
      // A signal name with a NUL no longer reaches the store: the name rule refuses it first (issue 34, item 3).
      const One = syntheticPipeline({ name: 'store-rejected', steps: 1 });
      const wp = await Waypoint.create({ modules: [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store))] });
      await wp.prepare(One, { runId: 'via-signal', input: {} });
      await assert.rejects(wp.signal('via-signal', 'go\u0000now', 1), (err: WaypointError) => err.code === 'INVALID_SIGNAL_NAME');
      assert.deepEqual(await store.listOperations('via-signal'), [], 'no operation stored');
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });

  it('PostgreSQL and SQLite: a CHECK constraint violation is STORE_REJECTED; the run is unchanged', async () => {
    const schema = schemaFor('store-rejected check');
    await dropSchema(schema);
    const { file, remove } = tempSqlitePath();
    const stores = [new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema }), new TypeOrmCheckpointStore({ type: 'sqlite', path: file })];
    try {
      for (const store of stores) {
        await store.init();
        await store.createRun(newRun('r1'));
        await assert.rejects(store.updateRun('r1', { status: 'bogus' as RunStatus }, null), rejected(/r1/));
        assert.equal((await store.getRun('r1'))?.status, 'running', store.backend);
      }
    } finally {
      for (const store of stores) await store.close();
      await dropSchema(schema);
      remove();
    }
  });

  it('PostgreSQL: a refused connection stays STORE_UNAVAILABLE', async () => {
    const store = new TypeOrmCheckpointStore({ type: 'postgres', url: 'postgres://postgres@127.0.0.1:1/test', schema: 'unused' });
    await assert.rejects(store.init(), (err: WaypointError) => err.code === 'STORE_UNAVAILABLE' && /ECONNREFUSED|connect/.test(err.message));
  });

  it('the CLI exits 1 (failed, not retried) on STORE_REJECTED, 5 stays for unreachable stores', () => {
    assert.equal(exitCodeForError(new StoreRejectedError('postgres', 'createRun', new Error('invalid byte sequence'), 'r')), 1);
  });
});
