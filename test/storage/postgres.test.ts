import type { CheckpointStore } from '../../src/contract/checkpoint-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { runStoreConformance } from '../../src/testing';

// A fresh schema per test, named from the test's name, dropped before (leftovers) and after.
runStoreConformance({
  name: 'postgres',
  makeStore: async (testName) => {
    const schema = schemaFor(testName);
    await dropSchema(schema);
    const stores: CheckpointStore[] = [];
    const open = () => (stores.push(new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 4 })), stores.at(-1)!);
    return { store: open(), sibling: open, cleanup: async () => (await Promise.all(stores.map((s) => s.close())), await dropSchema(schema)) };
  },
});

// ---- PostgreSQL specifics: schema layout, migrations under the advisory lock, round trips, errors, DI ----
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { Container } from 'inversify';
import { Client, type Pool } from 'pg';
import { TOKENS } from '../../src/contract/tokens';
import { postgresStorage } from '../../src/storage/modules';
import { cursorAt, leasedRun, stepRecord, withCode } from '../helpers/store-records';

const opened: { store: TypeOrmCheckpointStore; schema: string }[] = [];
after(async () => {
  for (const { store, schema } of opened.splice(0)) {
    await store.close();
    await dropSchema(schema);
  }
});

/** A store on a fresh schema for this test, closed and dropped after the file. */
async function fresh(testName: string, options: { poolSize?: number; init?: boolean } = {}): Promise<TypeOrmCheckpointStore> {
  const schema = schemaFor(`postgres specifics: ${testName}`);
  await dropSchema(schema);
  const store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: options.poolSize });
  opened.push({ store, schema });
  if (options.init !== false) await store.init();
  return store;
}

describe('postgres store specifics', () => {
  it('keeps every table in its schema: payloads text, times timestamptz(3), the documented indexes', async () => {
    const store = await fresh('layout');
    const schema = schemaFor('postgres specifics: layout');
    const columns: { table_name: string; column_name: string; data_type: string; datetime_precision: number | null }[] = await store.dataSource.query(
      `SELECT table_name, column_name, data_type, datetime_precision FROM information_schema.columns WHERE table_schema = $1`,
      [schema],
    );
    const type = (table: string, column: string) => columns.find((c) => c.table_name === table && c.column_name === column);
    for (const [table, column] of [
      ['waypoint_runs', 'input'],
      ['waypoint_steps', 'output'],
      ['waypoint_steps', 'memory'],
      ['waypoint_operations', 'result'],
      ['waypoint_events', 'data'],
      ['waypoint_stream_batches', 'body'],
    ]) {
      assert.equal(type(table, column)?.data_type, 'text', `${table}.${column}`);
    }
    assert.deepEqual(type('waypoint_steps', 'started_at'), {
      table_name: 'waypoint_steps',
      column_name: 'started_at',
      data_type: 'timestamp with time zone',
      datetime_precision: 3,
    });
    assert.deepEqual([...new Set(columns.map((c) => c.table_name))].sort(), [
      'waypoint_events',
      'waypoint_migrations',
      'waypoint_operations',
      'waypoint_runs',
      'waypoint_steps',
      'waypoint_stream_batches',
    ]);
    const indexes: { indexdef: string }[] = await store.dataSource.query(`SELECT indexdef FROM pg_indexes WHERE schemaname = $1 ORDER BY indexname`, [schema]);
    const defs = indexes.map((i) => i.indexdef.replace(/^.* USING btree /, ''));
    for (const expected of ['(operation_key)', '(run_id)', '(pipeline_name)', '(status)', '(run_id, sequence)', '(parent_run_id)', '(run_id, "offset")']) {
      assert.ok(defs.includes(expected), `index ${expected} in ${defs.join(' | ')}`);
    }
  });

  it('stores migrating one fresh schema at once all succeed and record the migration once', async () => {
    const stores = await Promise.all([0, 1, 2].map(() => fresh('concurrent migrations', { init: false })));
    await Promise.all(stores.map((s) => s.init()));
    const rows: unknown = await stores[0].dataSource.query(`SELECT name FROM "${schemaFor('postgres specifics: concurrent migrations')}".waypoint_migrations ORDER BY id`);
    assert.deepEqual(rows, [
      { name: 'WaypointInitialSchema1735689600000' },
      { name: 'WaypointHotRunUpdates1767312000000' },
      { name: 'WaypointControlFlow1767398400000' },
      { name: 'WaypointStepCursor1767484800000' },
      { name: 'WaypointRunStreams1767571200000' },
      { name: 'WaypointStreamBatches1767657600000' },
    ]);
  });

  it('initializes with a pool of one (the lock is held by the migrating connection)', async () => {
    const store = await fresh('pool of one', { poolSize: 1 });
    const epoch = await leasedRun(store, 'r1');
    await store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch } });
    assert.equal((await store.getRun('r1'))?.lastSequence, 1);
  });

  it('the hot path is one round trip per call: appendStep, beginOperation, finishOperation, renewLease', async () => {
    const store = await fresh('round trips');
    const epoch = await leasedRun(store, 'r1');
    // Every statement on every connection (appends run on a connection kept out of the pool, the rest through pool.query).
    const proto = Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
    const original = proto.query;
    let calls = 0;
    proto.query = function (this: Client, ...args: unknown[]) {
      calls++;
      return original.apply(this, args);
    };
    const count = async (fn: () => Promise<unknown>) => ((calls = 0), await fn(), calls);
    try {
      assert.equal(await count(() => store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch } })), 1);
      const stale = () => store.appendStep({ step: stepRecord('r1', 2), run: cursorAt(2), fence: { epoch: epoch + 1 } });
      // A rejected append (off the hot path) takes the steady statement, then the full one, which rejects.
      assert.equal(await count(() => assert.rejects(stale(), withCode('LEASE_LOST'))), 2, 'a rejected append: two');
      // A transition too: the steady statement writes nothing for a paused run, the full one writes the row.
      await store.updateRun('r1', { status: 'paused', resumeHint: 'paused by SIGTERM at step 1' }, { epoch });
      assert.equal(await count(() => store.appendStep({ step: stepRecord('r1', 2), run: cursorAt(2), fence: { epoch } })), 2, 'a transition: two');
      assert.equal(await count(() => store.appendStep({ step: stepRecord('r1', 3), run: cursorAt(3), fence: { epoch } })), 1, 'back to one');
      // A status change asked by the append goes straight to the full statement.
      assert.equal(await count(() => store.appendStep({ step: stepRecord('r1', 4), run: cursorAt(4, { status: 'waiting', resumeHint: 'signal' }), fence: { epoch } })), 1);
      const op = { operationKey: 'r1/op', runId: 'r1', stepKey: 'a/s', name: 'send' };
      assert.equal(await count(() => store.beginOperation(op, { epoch })), 1);
      assert.equal(await count(() => store.finishOperation('r1/op', { state: 'committed', result: '1' }, { runId: 'r1', epoch })), 1);
      assert.equal(await count(() => store.beginOperation(op, { epoch })), 1, 'committed comes back in the same round trip');
      assert.equal(await count(() => store.renewLease('r1', 'worker-a', epoch, 60_000)), 1);
      assert.equal(await count(() => store.loadRun('r1')), 1);
    } finally {
      proto.query = original;
    }
  });

  it('an append holds the run row FOR SHARE: a lease takeover waits for its commit, then the stale writer is fenced out', async () => {
    const store = await fresh('append fence');
    const epoch = await leasedRun(store, 'r1', 'worker-a');
    // The append inside a step transaction keeps its lock until COMMIT, as a slow commit would.
    const tx = await store.beginTransaction('r1', { epoch });
    await tx.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch } });
    let granted = false;
    const takeover = store.acquireLease('r1', 'worker-b', 60_000, 'worker-a').then((grant) => ((granted = true), grant));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(granted, false, 'the takeover waits for the append that holds the run row');
    await tx.commit();
    const grant = (await takeover)!;
    assert.equal(grant.epoch, epoch + 1);
    // The new owner reads the step the old one committed before it got the lease ...
    assert.equal((await store.getRun('r1'))!.lastSequence, 1);
    // ... and the old owner can no longer append, nor can a duplicate of the new owner's sequence land.
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 2), run: cursorAt(2), fence: { epoch } }), withCode('LEASE_LOST'));
    await store.appendStep({ step: stepRecord('r1', 2), run: cursorAt(2), fence: { epoch: grant.epoch } });
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 2), run: cursorAt(2), fence: { epoch: grant.epoch } }), withCode('LEASE_LOST'));
    assert.deepEqual(
      (await store.listSteps('r1')).map((s) => s.sequence),
      [1, 2],
    );
  });

  it('an append writes the step row only: the run row keeps its tuple (xmin) until a status change', async () => {
    const store = await fresh('append leaves run row');
    const epoch = await leasedRun(store, 'r1');
    const pool = (store.dataSource.driver as unknown as { master: Pool }).master;
    const table = `"${schemaFor('postgres specifics: append leaves run row')}".waypoint_runs`;
    const xmin = async () => (await pool.query<{ xmin: string }>(`SELECT xmin::text FROM ${table} WHERE run_id = 'r1'`)).rows[0].xmin;
    const before = await xmin();
    for (let sequence = 1; sequence <= 5; sequence++) await store.appendStep({ step: stepRecord('r1', sequence), run: cursorAt(sequence), fence: { epoch } });
    assert.equal(await xmin(), before, 'no new run-row version for five appends');
    const run = (await store.getRun('r1'))!;
    assert.deepEqual([run.lastSequence, run.cursorStep, run.status], [5, 5, 'running']);
    await store.appendStep({ step: stepRecord('r1', 6), run: cursorAt(6, { status: 'waiting', resumeHint: 'signal' }), fence: { epoch } });
    assert.notEqual(await xmin(), before, 'a status change writes the run row');
  });

  it('an unreachable server surfaces as STORE_UNAVAILABLE', async () => {
    const store = new TypeOrmCheckpointStore({ type: 'postgres', url: 'postgres://postgres@127.0.0.1:1/test', schema: 'nowhere' });
    await assert.rejects(store.init(), (err: Error) => withCode('STORE_UNAVAILABLE')(err) && /\(postgres\).*init/.test(err.message));
    await assert.rejects(store.getRun('r1'), withCode('STORE_UNAVAILABLE'));
    await store.close();
  });

  it('postgresStorage() binds a TypeOrmCheckpointStore; bad schema names are refused up front', () => {
    const container = new Container();
    container.load(postgresStorage({ url: PG_TEST_URL, schema: 'wp_di' }));
    const store = container.get(TOKENS.CheckpointStore);
    assert.ok(store instanceof TypeOrmCheckpointStore);
    assert.equal(store.backend, 'postgres');
    assert.throws(() => postgresStorage({ url: PG_TEST_URL, schema: 'a"b' }), withCode('INVALID_STORE_OPTIONS'));
    assert.throws(() => postgresStorage({ url: '' }), withCode('INVALID_STORE_OPTIONS'));
  });
});
