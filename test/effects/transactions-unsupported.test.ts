import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { beforeEach, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { MemoryCheckpointStore, TOKENS, Waypoint, currentOperation, currentTransaction, supportsTransactions, type WaypointError } from '../../src/index';
import { RedisCheckpointStore } from '../../src/storage/redis/redis-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import type { LedgerDb } from './ledger';
import { Bookkeeping, Misuse, Plain, effectsModule, knobs, resetKnobs } from './transactional-fixtures';

// Stores that cannot share a transaction with user code refuse a transactional side effect up front,
// with a typed error, before the effect runs.

const noLedger = {} as LedgerDb; // never reached: the effects fail before they write

async function memoryWaypoint(store = new MemoryCheckpointStore()): Promise<Waypoint> {
  return Waypoint.create({
    modules: [effectsModule(noLedger), new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store))],
  });
}

beforeEach(resetKnobs);

describe('transactional side effects on a store without transactions', () => {
  it('only the SQL store offers the capability', () => {
    assert.equal(supportsTransactions(new MemoryCheckpointStore()), false);
    assert.equal(supportsTransactions(new RedisCheckpointStore({ keyPrefix: 'wp-test:never-connected:' })), false);
    assert.equal(supportsTransactions(new TypeOrmCheckpointStore({ type: 'sqlite', path: '/nonexistent/never-opened.db' })), true);
  });

  it('memory: TRANSACTIONS_UNSUPPORTED names the run, step, operation and store; the effect never runs; no retry', async () => {
    const store = new MemoryCheckpointStore();
    const waypoint = await memoryWaypoint(store);
    await assert.rejects(waypoint.run(Bookkeeping, { runId: 'no-tx', input: {} }), (err: WaypointError) => {
      assert.equal(err.code, 'TRANSACTIONS_UNSUPPORTED');
      assert.equal(err.runId, 'no-tx');
      assert.equal(err.step, 'Bookkeeper/record');
      assert.match(err.message, /Side effect 'book' in step 'Bookkeeper\/record' of run 'no-tx' asked for a transaction/);
      assert.match(err.message, /MemoryCheckpointStore, backend 'memory'/);
      assert.match(err.message, /sqliteStorage\(\) or postgresStorage\(\)/);
      return true;
    });
    assert.equal(knobs.calls, 0);
    assert.deepEqual(
      (await store.listOperations('no-tx')).filter((o) => o.name === 'book'),
      [],
    );
    const run = await waypoint.get('no-tx');
    assert.equal(run?.status, 'failed');
    assert.equal(run?.lastSequence, 0);
  });

  it('memory: guardedExecute(..., { transactional: true }) is refused the same way', async () => {
    const waypoint = await memoryWaypoint();
    await assert.rejects(waypoint.run(Plain, { runId: 'no-tx-plain', input: {} }), (err: WaypointError) => err.code === 'TRANSACTIONS_UNSUPPORTED');
  });

  it('currentTransaction() in a non-transactional effect: NO_TRANSACTION naming the effect', async () => {
    const waypoint = await memoryWaypoint();
    await assert.rejects(waypoint.run(Misuse, { runId: 'misuse', input: {} }), (err: WaypointError) => {
      assert.equal(err.code, 'STEP_FAILED');
      const effect = err.cause as WaypointError;
      assert.equal(effect.code, 'SIDE_EFFECT_FAILED');
      const cause = effect.cause as WaypointError;
      assert.equal(cause.code, 'NO_TRANSACTION');
      assert.match(cause.message, /Side effect 'misuse' is not transactional, so it has no transaction/);
      return true;
    });
  });

  it('currentTransaction() and currentOperation() outside any side effect: typed errors', () => {
    assert.throws(
      () => currentTransaction(),
      (err: WaypointError) => err.code === 'NO_TRANSACTION' && /outside a side effect/.test(err.message),
    );
    assert.throws(
      () => currentOperation(),
      (err: WaypointError) => err.code === 'NO_ACTIVE_OPERATION',
    );
  });
});
