import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { after, afterEach, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { CheckpointStore } from '../../src/contract/checkpoint-store';
import { HYDRATION_EPOCH_JUMP, WriteBehindCheckpointStore } from '../../src/storage/tiered/write-behind-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { appendSteps, cursorAt, leasedRun, newRun, sleep, stepRecord, withCode } from '../helpers/store-records';
import { TcpProxy } from '../helpers/tcp-proxy';
import { MemoryLogger, REDIS_TEST_URL, deleteKeysUnder } from '../lease/backends';
import { runStoreConformance } from '../../src/testing';
import { twoTierFixture } from '../helpers/tiered-fixture';

// Write-behind: Redis takes the writes, a journal stream carries them to PostgreSQL. Each test has its
// own schema and key prefix (the journal lives under the prefix too).
runStoreConformance({
  name: 'tiered write-behind',
  makeStore: (testName) =>
    twoTierFixture(
      testName,
      'wb',
      (p) => new WriteBehindCheckpointStore({ redis: { url: REDIS_TEST_URL, keyPrefix: p.prefix }, postgres: { url: p.pgUrl, schema: p.schema, poolSize: 3 } }),
    ),
});

const admin = new Redis(REDIS_TEST_URL);
after(() => admin.disconnect());
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Setup {
  store: WriteBehindCheckpointStore;
  pg: TypeOrmCheckpointStore;
  prefix: string;
  open: (options?: { disableFlusher?: boolean; pgUrl?: string }) => Promise<WriteBehindCheckpointStore>;
}

async function setup(name: string, options: { disableFlusher?: boolean; pgUrl?: string } = {}): Promise<Setup> {
  const schema = schemaFor(`write-behind: ${name}`);
  const prefix = `wp-test:wb:${randomUUID()}:`;
  await dropSchema(schema);
  const stores: WriteBehindCheckpointStore[] = [];
  const open = async (o: { disableFlusher?: boolean; pgUrl?: string } = {}) => {
    const store = new WriteBehindCheckpointStore({
      redis: { url: REDIS_TEST_URL, keyPrefix: prefix },
      postgres: { url: o.pgUrl ?? PG_TEST_URL, schema, poolSize: 3 },
      writeBehind: { blockMs: 20, disableFlusher: o.disableFlusher },
      logger: new MemoryLogger(),
    });
    stores.push(store);
    await store.init();
    return store;
  };
  const store = await open(options);
  const pg = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 2 });
  await pg.init();
  cleanups.push(async () => {
    for (const s of stores) await s.close();
    await pg.close();
    await dropSchema(schema);
    await deleteKeysUnder(prefix);
  });
  return { store, pg, prefix, open };
}

/** Everything the store holds for a run, as PostgreSQL must hold it once flushed. */
async function snapshot(store: CheckpointStore, runId: string) {
  return { loaded: await store.loadRun(runId), operations: await store.listOperations(runId) };
}

describe('tiered write-behind: the journal carries every change to PostgreSQL', () => {
  it('after a drain, PostgreSQL holds exactly what Redis holds: run row, steps, operations', async () => {
    const { store, pg } = await setup('mirror');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 6);
    await store.beginOperation({ operationKey: 'op-1', runId: 'r1', stepKey: 'a/s', name: 'send' }, { epoch });
    await store.finishOperation('op-1', { state: 'committed', result: '{"id":1}' }, { runId: 'r1', epoch });
    await store.truncateSteps('r1', 5, { cursorAgent: 0, cursorStep: 4 }, { epoch });
    await store.appendStep({ step: stepRecord('r1', 5, { checkpointId: 'again-5' }), run: cursorAt(5), fence: { epoch } });
    await store.compactSteps('r1', stepRecord('r1', 2, { checkpointId: 'base-2' }));
    await store.updateRun('r1', { status: 'paused', resumeHint: 'later' }, { epoch });
    await leasedRun(store, 'r2');
    await store.cancelRun('r2', 'no longer needed');
    await store.drain();
    for (const runId of ['r1', 'r2']) assert.deepEqual(await snapshot(pg, runId), await snapshot(store, runId), runId);
    assert.deepEqual(
      (await pg.listSteps('r1')).map((s) => s.checkpointId),
      ['base-2', 'r1-cp-3', 'r1-cp-4', 'again-5'],
    );
    assert.equal(await store.backlog(), 0, 'acknowledged entries leave the journal');
    assert.ok(store.stats.flushedEntries > 0);

    await store.deleteRun('r2');
    assert.equal(await pg.getRun('r2'), null, 'a delete reaches PostgreSQL at once');
    await store.drain();
    assert.equal(await store.getRun('r2'), null);
  });

  it('while PostgreSQL is unreachable the run goes on in Redis, nothing is acknowledged, and it all lands once it is back', async () => {
    const proxy = await TcpProxy.start({ port: 5432 });
    cleanups.push(() => proxy.close());
    const { store: seed, pg, open } = await setup('pg-down', { disableFlusher: true });
    const store = await open({ pgUrl: proxy.url('postgres') }); // its flusher reaches PostgreSQL through the proxy
    const epoch = await leasedRun(seed, 'r1');
    await appendSteps(seed, 'r1', epoch, 2);
    await store.drain();
    proxy.cut();
    const started = Date.now();
    await appendSteps(seed, 'r1', epoch, 4, 3);
    assert.ok(Date.now() - started < 1_000, 'appends do not wait for PostgreSQL');
    await sleep(300);
    assert.ok((await store.backlog()) >= 4, 'the changes wait in the journal');
    assert.equal((await pg.getRun('r1'))?.lastSequence, 2);
    assert.ok(store.stats.flushFailures >= 1);

    proxy.restore();
    await store.drain(15_000);
    assert.deepEqual(await snapshot(pg, 'r1'), await snapshot(seed, 'r1'));
    const pending = (await admin.xpending(`${store.options.redis.keyPrefix}journal`, 'waypoint-flushers')) as [number, ...unknown[]];
    assert.equal(pending[0], 0, 'nothing left unacknowledged');
  });

  it('entries a dead flusher read but never acknowledged are claimed and applied by the next one', async () => {
    const { store: writer, pg, prefix, open } = await setup('claim', { disableFlusher: true });
    const stream = `${prefix}journal`;
    const epoch = await leasedRun(writer, 'r1');
    await appendSteps(writer, 'r1', epoch, 3);
    await admin.xgroup('CREATE', stream, 'waypoint-flushers', '0', 'MKSTREAM');
    const read = (await admin.xreadgroup('GROUP', 'waypoint-flushers', 'dead-flusher', 'COUNT', 100, 'STREAMS', stream, '>')) as [string, unknown[]][];
    assert.ok(read[0][1].length >= 4, 'the dead flusher took every entry');
    await appendSteps(writer, 'r1', epoch, 1, 4);
    const flusher = await open();
    await flusher.drain(10_000);
    assert.deepEqual(await snapshot(pg, 'r1'), await snapshot(writer, 'r1'));
    const pending = (await admin.xpending(stream, 'waypoint-flushers')) as [number, ...unknown[]];
    assert.equal(pending[0], 0);
    const consumers = async () => ((await admin.xinfo('CONSUMERS', stream, 'waypoint-flushers')) as string[][]).map((c) => c[1]);
    const deadline = Date.now() + 5_000;
    while ((await consumers()).includes('dead-flusher') && Date.now() < deadline) await sleep(20);
    assert.equal((await consumers()).includes('dead-flusher'), false, 'the dead flusher is forgotten once its entries were claimed');
  });

  it('one flusher writes at a time: the others wait for the PostgreSQL lock and take over when it is gone', async () => {
    const { store: first, pg, open } = await setup('one-flusher');
    const second = await open();
    const epoch = await leasedRun(first, 'r1');
    await appendSteps(first, 'r1', epoch, 2);
    await first.drain();
    const flushed = [first.stats.flushedEntries, second.stats.flushedEntries];
    assert.equal(flushed.filter((n) => n > 0).length, 1, `exactly one of the two flushed (${flushed.join(', ')})`);
    const [leader, standby] = flushed[0] > 0 ? [first, second] : [second, first];
    await leader.close();
    await appendSteps(standby, 'r1', epoch, 2, 3);
    await standby.drain(10_000);
    assert.equal((await pg.getRun('r1'))?.lastSequence, 4);
    assert.ok(standby.stats.flushedEntries > 0, 'the other process took over the flushing');
  });
});

describe('tiered write-behind: payloads rewritten in place (re-encryption)', () => {
  it('reach PostgreSQL through the journal, rows it already had and every operation included', async () => {
    const { store, pg } = await setup('rewrite');
    const epoch = await leasedRun(store, 'r1');
    const steps = await appendSteps(store, 'r1', epoch, 4);
    await store.beginOperation({ operationKey: 'op-1', runId: 'r1', stepKey: 'a/s', name: 'send' }, { epoch });
    await store.finishOperation('op-1', { state: 'committed', result: '{"id":1}' }, { runId: 'r1', epoch });
    await store.drain(); // PostgreSQL has all of it: only a journal notice can make the flusher copy it again
    const input = (await store.getRun('r1'))!.input;
    const outcome = await store.rewritePayloads('r1', {
      input: { from: input, to: 'sealed:input' },
      steps: [
        { sequence: 1, output: { from: steps[0].output, to: 'sealed:1' }, memory: { from: steps[0].memory!, to: 'sealed:m1' } },
        { sequence: 3, output: { from: steps[2].output, to: 'sealed:3' } },
      ],
      operations: [{ operationKey: 'op-1', result: { from: '{"id":1}', to: 'sealed:result' } }],
    });
    assert.deepEqual(outcome, { rewritten: 5, skipped: 0 });
    await store.drain();
    assert.deepEqual(await snapshot(pg, 'r1'), await snapshot(store, 'r1'));
    assert.deepEqual(
      (await pg.listSteps('r1')).map((s) => s.output),
      ['sealed:1', steps[1].output, 'sealed:3', steps[3].output],
    );
    assert.equal((await pg.getOperation('op-1'))?.result, 'sealed:result');
    assert.equal((await pg.getRun('r1'))?.input, 'sealed:input');
  });
});

describe('tiered write-behind: a run only PostgreSQL has comes back on first use', () => {
  it('is copied back into Redis with a raised epoch: a stale executor is fenced, a new one continues', async () => {
    const { store, pg, prefix } = await setup('hydrate');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 3);
    await store.beginOperation({ operationKey: 'op-1', runId: 'r1', stepKey: 'a/s', name: 'send' }, { epoch });
    await store.drain();
    const flushed = await snapshot(pg, 'r1');
    await admin.del(`${prefix}run:{r1}`, `${prefix}run:{r1}:steps`, `${prefix}run:{r1}:ops`, `${prefix}op:op-1`); // as if Redis lost the run

    const loaded = await store.loadRun('r1');
    assert.deepEqual(loaded?.steps, flushed.loaded?.steps);
    assert.deepEqual(await store.listOperations('r1'), flushed.operations);
    assert.equal(loaded?.run.leaseEpoch, epoch + HYDRATION_EPOCH_JUMP);
    assert.equal(loaded?.run.leaseOwner, null, 'it comes back free');
    assert.equal(store.stats.cacheMisses, 1);
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 4), run: cursorAt(4), fence: { epoch } }), withCode('LEASE_LOST'));

    const grant = (await store.acquireLease('r1', 'worker-b', 60_000))!;
    assert.equal(grant.epoch, epoch + HYDRATION_EPOCH_JUMP + 1);
    await appendSteps(store, 'r1', grant.epoch, 1, 4);
    await store.drain();
    assert.equal((await pg.getRun('r1'))?.leaseEpoch, grant.epoch, 'the raised epoch reaches PostgreSQL too');
    assert.equal((await pg.loadRun('r1'))?.steps.length, 4);
  });

  it('a step path and a parent run reach PostgreSQL through the journal and come back into Redis with the run', async () => {
    const { store, pg, prefix } = await setup('control-flow');
    await store.createRun(newRun('child', { parentRunId: 'parent' }));
    const grant = (await store.acquireLease('child', 'worker-a', 60_000))!;
    const steps = [stepRecord('child', 1, { path: 'forEach(reviews)[17]/FileReviewer/review' }), stepRecord('child', 2, { path: null })];
    for (const step of steps) await store.appendStep({ step, run: cursorAt(step.sequence), fence: { epoch: grant.epoch } });
    await store.drain();
    assert.deepEqual(await snapshot(pg, 'child'), await snapshot(store, 'child'));
    assert.equal((await pg.getRun('child'))?.parentRunId, 'parent');
    assert.deepEqual(
      (await pg.listSteps('child')).map((s) => s.path),
      ['forEach(reviews)[17]/FileReviewer/review', null],
    );

    await admin.del(`${prefix}run:{child}`, `${prefix}run:{child}:steps`, `${prefix}run:{child}:ops`, `${prefix}idx:parent:parent`); // as if Redis lost it
    const loaded = (await store.loadRun('child'))!;
    assert.equal(loaded.run.parentRunId, 'parent');
    assert.deepEqual(loaded.steps, steps);
    assert.deepEqual(
      (await store.listRuns({ parentRunId: 'parent' })).map((r) => r.runId),
      ['child'],
      'listed from Redis and PostgreSQL once',
    );
    assert.equal((await admin.zscore(`${prefix}idx:parent:parent`, 'child')) !== null, true, 'the copy back restores the parent index');
  });

  it('createRun, acquireLease and listRuns see runs that only PostgreSQL has', async () => {
    const { store, pg, prefix } = await setup('cold-runs');
    await pg.createRun(newRun('cold', { pipelineName: 'p' })); // written before write-behind was in use
    await store.createRun(newRun('hot', { pipelineName: 'p' }));
    assert.deepEqual((await store.listRuns({ pipelineName: 'p' })).map((r) => r.runId).sort(), ['cold', 'hot']);
    assert.equal((await store.createRun(newRun('cold'))).created, false, 'not created a second time');
    await admin.del(`${prefix}run:{cold}`);
    assert.ok(await store.acquireLease('cold', 'w', 60_000), 'a lease on a run only PostgreSQL has');
    assert.equal(await store.getRun('nowhere'), null);
    assert.deepEqual(await store.listSteps('nowhere'), []);
  });

  it('a Redis outage fails the call with STORE_UNAVAILABLE (Redis holds the newest writes)', async () => {
    const proxy = await TcpProxy.start({ port: 6379 });
    cleanups.push(() => proxy.close());
    const schema = schemaFor('write-behind: redis down');
    await dropSchema(schema);
    const prefix = `wp-test:wb:${randomUUID()}:`;
    const store = new WriteBehindCheckpointStore({ redis: { url: proxy.url('redis'), keyPrefix: prefix }, postgres: { url: PG_TEST_URL, schema }, logger: new MemoryLogger() });
    cleanups.push(async () => (await store.close(), await dropSchema(schema), await deleteKeysUnder(prefix)));
    await store.init();
    const epoch = await leasedRun(store, 'r1');
    proxy.cut();
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch } }), withCode('STORE_UNAVAILABLE'));
  });
});
