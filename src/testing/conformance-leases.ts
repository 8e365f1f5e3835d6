import { strict as assert } from 'node:assert';
import { describe } from 'node:test';
import type { NewOperation } from '../contract/checkpoint-store';
import type { StoreTest } from './fixture';
import { appendSteps, assertRecent, cursorAt, leasedRun, newRun, sleep, stepRecord, withCode } from './store-records';

/**
 * The second half of the conformance suite (src/testing/conformance.ts): leases and fencing, the
 * committed-operations log, cancel, retention and truncation. Split out only to keep files short.
 */
export function leaseAndOperationCases(test: StoreTest): void {
  describe('leases', () => leaseCases(test));
  describe('operations', () => operationCases(test));
  describe('cancel, compact, truncate', () => maintenanceCases(test));
}

function leaseCases(test: StoreTest): void {
  test('acquireLease on a free run grants epoch 1; another owner gets null while it is held', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const grant = (await store.acquireLease('r1', 'worker-a', 30_000))!;
    assert.equal(grant.owner, 'worker-a');
    assert.equal(grant.epoch, 1);
    assert.ok(Math.abs(grant.expiresAt.getTime() - (Date.now() + 30_000)) < 5_000, 'expiresAt is about now + ttl');
    const run = (await store.getRun('r1'))!;
    assert.deepEqual([run.leaseOwner, run.leaseEpoch, run.leaseExpiresAt], ['worker-a', 1, grant.expiresAt]);
    assert.equal(await store.acquireLease('r1', 'worker-b', 30_000), null);
    assert.deepEqual(await store.getRun('r1'), run);
    assert.equal(await store.acquireLease('unknown', 'worker-a', 30_000), null);
  });

  test('takeOverFrom takes a live lease only from the named (dead) owner, with a new epoch', async ({ store }) => {
    await store.createRun(newRun('r1'));
    assert.equal((await store.acquireLease('r1', 'dead-worker', 30_000))?.epoch, 1);
    assert.equal(await store.acquireLease('r1', 'worker-b', 30_000, 'someone-else'), null, 'a different holder is not taken over');
    const taken = await store.acquireLease('r1', 'worker-b', 30_000, 'dead-worker');
    assert.equal(taken?.epoch, 2);
    assert.equal((await store.getRun('r1'))?.leaseOwner, 'worker-b');
    assert.equal(await store.renewLease('r1', 'dead-worker', 1, 30_000), false, 'the dead owner is fenced out');
  });

  test('the holder re-acquiring gets the next epoch', async ({ store }) => {
    await store.createRun(newRun('r1'));
    assert.equal((await store.acquireLease('r1', 'worker-a', 30_000))?.epoch, 1);
    assert.equal((await store.acquireLease('r1', 'worker-a', 30_000))?.epoch, 2);
  });

  test('an expired lease is taken over with a new epoch; the old holder is fenced out', async ({ store }) => {
    const first = (await (async () => (await store.createRun(newRun('r1')), store.acquireLease('r1', 'worker-a', 50)))())!;
    assert.equal(await store.acquireLease('r1', 'worker-b', 30_000), null, 'not yet expired');
    await sleep(80);
    const second = (await store.acquireLease('r1', 'worker-b', 30_000))!;
    assert.equal(second.epoch, first.epoch + 1);
    assert.equal(await store.renewLease('r1', 'worker-a', first.epoch, 30_000), false);
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch: first.epoch } }), withCode('LEASE_LOST'));
    await store.releaseLease('r1', 'worker-a', first.epoch); // stale release: a no-op
    assert.equal((await store.getRun('r1'))?.leaseOwner, 'worker-b');
    await appendSteps(store, 'r1', second.epoch, 1);
  });

  test('renewLease extends the current lease only', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const grant = (await store.acquireLease('r1', 'worker-a', 1_000))!;
    assert.equal(await store.renewLease('r1', 'worker-a', grant.epoch, 60_000), true);
    const renewed = (await store.getRun('r1'))!;
    assert.ok(renewed.leaseExpiresAt!.getTime() > grant.expiresAt.getTime() + 30_000, 'expiry moved out');
    assert.equal(renewed.leaseEpoch, grant.epoch, 'renewal keeps the epoch');
    assert.equal(await store.renewLease('r1', 'worker-b', grant.epoch, 60_000), false, 'wrong owner');
    assert.equal(await store.renewLease('r1', 'worker-a', grant.epoch + 1, 60_000), false, 'wrong epoch');
    assert.equal(await store.renewLease('unknown', 'worker-a', 1, 60_000), false);
    const month = 31 * 24 * 3600 * 1000; // past 2^31 ms: no 32-bit overflow anywhere
    assert.equal(await store.renewLease('r1', 'worker-a', grant.epoch, month), true);
    assert.ok(Math.abs((await store.getRun('r1'))!.leaseExpiresAt!.getTime() - (Date.now() + month)) < 5_000);
  });

  test('releaseLease frees the run and keeps the epoch, which is never reused', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const grant = (await store.acquireLease('r1', 'worker-a', 60_000))!;
    await store.releaseLease('r1', 'worker-b', grant.epoch); // wrong owner: no-op
    assert.equal((await store.getRun('r1'))?.leaseOwner, 'worker-a');
    await store.releaseLease('r1', 'worker-a', grant.epoch);
    const run = (await store.getRun('r1'))!;
    assert.deepEqual([run.leaseOwner, run.leaseExpiresAt, run.leaseEpoch], [null, null, grant.epoch]);
    assert.equal((await store.acquireLease('r1', 'worker-b', 60_000))?.epoch, grant.epoch + 1);
  });

  test('setLeaseExpiry answers whether owner and epoch are current; null frees the lease and keeps the epoch', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const grant = (await store.acquireLease('r1', 'worker-a', 60_000))!;
    assert.equal(await store.setLeaseExpiry('r1', 'worker-b', grant.epoch, null), false, 'wrong owner');
    assert.equal(await store.setLeaseExpiry('r1', 'worker-a', grant.epoch - 1, 60_000), false, 'wrong epoch');
    assert.equal(await store.setLeaseExpiry('unknown', 'worker-a', grant.epoch, null), false, 'unknown run');
    assert.equal((await store.getRun('r1'))?.leaseOwner, 'worker-a');
    assert.equal(await store.setLeaseExpiry('r1', 'worker-a', grant.epoch, null), true);
    const run = (await store.getRun('r1'))!;
    assert.deepEqual([run.leaseOwner, run.leaseExpiresAt, run.leaseEpoch], [null, null, grant.epoch]);
    assert.equal(await store.setLeaseExpiry('r1', 'worker-a', grant.epoch, null), false, 'already freed');
  });

  test('concurrent acquisitions by different owners: exactly one wins', async ({ store, sibling }) => {
    await store.createRun(newRun('r1'));
    const stores = [store];
    if (sibling) {
      const other = sibling();
      await other.init();
      stores.push(other);
    }
    const grants = await Promise.all(Array.from({ length: 8 }, (_, i) => stores[i % stores.length].acquireLease('r1', `worker-${i}`, 60_000)));
    const winners = grants.filter((g) => g !== null);
    assert.equal(winners.length, 1);
    assert.equal((await store.getRun('r1'))?.leaseOwner, winners[0].owner);
  });
}

function op(runId: string, key = `${runId}/research/step1/send#0`): NewOperation {
  return { operationKey: key, runId, stepKey: 'research/step1', name: 'send' };
}

function operationCases(test: StoreTest): void {
  test('begin, fail, begin again, commit: attempts count and committed is terminal', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    const fence = { runId: 'r1', epoch };
    const started = await store.beginOperation(op('r1'), { epoch });
    const { createdAt, updatedAt, ...rest } = started;
    assert.deepEqual(rest, { ...op('r1'), state: 'started', result: null, error: null, attempts: 1 });
    assertRecent(createdAt, 'createdAt');
    assert.equal(updatedAt.getTime(), createdAt.getTime());
    assert.deepEqual(await store.getOperation(op('r1').operationKey), started);

    await store.finishOperation(op('r1').operationKey, { state: 'failed', error: '{"message":"503"}' }, fence);
    const failed = (await store.getOperation(op('r1').operationKey))!;
    assert.deepEqual([failed.state, failed.error, failed.result, failed.attempts], ['failed', '{"message":"503"}', null, 1]);

    const again = await store.beginOperation(op('r1'), { epoch });
    assert.deepEqual([again.state, again.attempts, again.createdAt], ['started', 2, createdAt]);

    await store.finishOperation(op('r1').operationKey, { state: 'committed', result: '{"id":"msg-1"}' }, fence);
    const committed = (await store.getOperation(op('r1').operationKey))!;
    assert.deepEqual([committed.state, committed.result, committed.error, committed.attempts], ['committed', '{"id":"msg-1"}', null, 2]);

    // Committed is terminal: begin returns it unchanged, a later finish is ignored.
    assert.deepEqual(await store.beginOperation(op('r1'), { epoch }), committed);
    await store.finishOperation(op('r1').operationKey, { state: 'failed', error: 'late' }, fence);
    await store.finishOperation(op('r1').operationKey, { state: 'committed', result: 'other' }, fence);
    assert.deepEqual(await store.getOperation(op('r1').operationKey), committed);
  });

  test('operations are fenced by the run lease epoch', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    await assert.rejects(store.beginOperation(op('r1'), { epoch: epoch + 1 }), withCode('LEASE_LOST'));
    assert.equal(await store.getOperation(op('r1').operationKey), null);
    await store.beginOperation(op('r1'), { epoch });
    await assert.rejects(store.finishOperation(op('r1').operationKey, { state: 'committed', result: 'x' }, { runId: 'r1', epoch: epoch - 1 }), withCode('LEASE_LOST'));
    assert.equal((await store.getOperation(op('r1').operationKey))?.state, 'started');
    await store.finishOperation(op('r1').operationKey, { state: 'committed', result: 'x' }, { runId: 'r1', epoch });
    await assert.rejects(store.beginOperation(op('r1'), { epoch: epoch + 1 }), withCode('LEASE_LOST'), 'even when committed');
    await assert.rejects(store.beginOperation(op('nope'), { epoch: 0 }), withCode('LEASE_LOST'));
  });

  test('finishing an unknown operation is a no-op; getOperation null', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    await store.finishOperation('never-begun', { state: 'committed', result: 'x' }, { runId: 'r1', epoch });
    assert.equal(await store.getOperation('never-begun'), null);
  });

  test('listOperations returns the run’s operations only', async ({ store }) => {
    const e1 = await leasedRun(store, 'r1');
    const e2 = await leasedRun(store, 'r2');
    for (const key of ['r1/b', 'r1/a', 'r1/c']) await store.beginOperation(op('r1', key), { epoch: e1 });
    await store.beginOperation(op('r2', 'r2/a'), { epoch: e2 });
    const keys = (await store.listOperations('r1')).map((o) => o.operationKey).sort();
    assert.deepEqual(keys, ['r1/a', 'r1/b', 'r1/c']);
    assert.deepEqual(await store.listOperations('unknown'), []);
  });

  test('putOperation inserts unfenced, once; an existing record is returned unchanged', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const put = await store.putOperation({ ...op('r1', 'signal'), name: 'signal:approve', state: 'committed', result: '"yes"', error: null });
    assert.deepEqual([put.state, put.result, put.error, put.attempts, put.name], ['committed', '"yes"', null, 1, 'signal:approve']);
    const again = await store.putOperation({ ...op('r1', 'signal'), state: 'committed', result: '"no"', error: null });
    assert.deepEqual(again, put);
    assert.deepEqual(await store.getOperation('signal'), put);
  });
}

function maintenanceCases(test: StoreTest): void {
  test('cancelRun cancels a live run and fences its executor out', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    const cancelled = (await store.cancelRun('r1', 'cancelled by operator'))!;
    assert.deepEqual(
      [cancelled.status, cancelled.resumeHint, cancelled.leaseOwner, cancelled.leaseExpiresAt, cancelled.leaseEpoch],
      ['cancelled', 'cancelled by operator', null, null, epoch + 1],
    );
    assert.deepEqual(await store.getRun('r1'), cancelled);
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch } }), withCode('LEASE_LOST'));
    assert.equal(await store.renewLease('r1', 'worker-a', epoch, 60_000), false);
    // Already terminal: unchanged.
    assert.deepEqual(await store.cancelRun('r1', 'again'), cancelled);
    await store.createRun(newRun('done'));
    await store.updateRun('done', { status: 'completed' }, null);
    const done = await store.getRun('done');
    assert.deepEqual(await store.cancelRun('done', 'too late'), done);
    assert.equal(await store.cancelRun('unknown', 'x'), null);
    // A failed run can still be cancelled, so that nobody resumes it by accident.
    await store.createRun(newRun('broken'));
    await store.updateRun('broken', { status: 'failed', error: '{"message":"boom"}' }, null);
    assert.equal((await store.cancelRun('broken', 'give up'))?.status, 'cancelled');
  });

  test('compactSteps replaces the rows up to the base by the base row, atomically', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    const steps = await appendSteps(store, 'r1', epoch, 5);
    const runBefore = await store.getRun('r1');
    const base = stepRecord('r1', 3, { checkpointId: 'base-3', output: '{"compacted":true}', memory: '{"all":1}' });
    await store.compactSteps('r1', base);
    assert.deepEqual(await store.listSteps('r1'), [base, steps[3], steps[4]]);
    assert.deepEqual(await store.getRun('r1'), runBefore, 'the run row is untouched');
    // Oldest row already at or after the base: no-op.
    await store.compactSteps('r1', stepRecord('r1', 3, { checkpointId: 'other' }));
    await store.compactSteps('r1', stepRecord('r1', 2, { checkpointId: 'older' }));
    assert.deepEqual(await store.listSteps('r1'), [base, steps[3], steps[4]]);
    const base5 = stepRecord('r1', 5, { checkpointId: 'base-5' });
    await store.compactSteps('r1', base5);
    assert.deepEqual(await store.listSteps('r1'), [base5]);
    await appendSteps(store, 'r1', epoch, 1, 6); // appending continues after the base
    await store.compactSteps('unknown', stepRecord('unknown', 2));
    assert.deepEqual(await store.listSteps('unknown'), []);
  });

  test('replaceSteps replaces a range in the middle, leaving the run row and the other rows', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    const steps = await appendSteps(store, 'r1', epoch, 4);
    const runBefore = await store.getRun('r1');
    const rows = [stepRecord('r1', 2, { checkpointId: 'two' }), stepRecord('r1', 3, { checkpointId: 'three', path: 'parallel[0]/a/s' })];
    await assert.rejects(store.replaceSteps('r1', { fromSequence: 2, toSequence: 3, rows, fence: { epoch: epoch + 1 } }), withCode('LEASE_LOST'));
    assert.deepEqual(await store.listSteps('r1'), steps, 'a stale fence writes nothing');
    await store.replaceSteps('r1', { fromSequence: 2, toSequence: 3, rows, fence: { epoch } });
    assert.deepEqual(await store.listSteps('r1'), [steps[0], ...rows, steps[3]]);
    assert.deepEqual(await store.getRun('r1'), runBefore, 'the run row is untouched without a cursor');
    await store.replaceSteps('unknown', { fromSequence: 1, rows: [stepRecord('unknown', 1)] });
    assert.equal(await store.getRun('unknown'), null);
    assert.deepEqual(await store.listSteps('unknown'), [], 'an unknown run gets no rows');
  });

  test('truncateSteps drops the tail and rewinds the run, fenced', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    const steps = await appendSteps(store, 'r1', epoch, 5);
    const before = await store.loadRun('r1');
    await assert.rejects(store.truncateSteps('r1', 3, { cursorAgent: 0, cursorStep: 2 }, { epoch: epoch + 1 }), withCode('LEASE_LOST'));
    assert.deepEqual(await store.loadRun('r1'), before);
    await store.truncateSteps('r1', 3, { cursorAgent: 1, cursorStep: 2 }, { epoch });
    const { run, steps: kept } = (await store.loadRun('r1'))!;
    assert.deepEqual(kept, steps.slice(0, 2));
    assert.deepEqual([run.lastSequence, run.cursorAgent, run.cursorStep, run.status], [2, 1, 2, 'running']);
    await appendSteps(store, 'r1', epoch, 1, 3); // the sequence continues from the cut
    await store.truncateSteps('r1', 10, { cursorAgent: 0, cursorStep: 3 }, { epoch });
    assert.equal((await store.getRun('r1'))?.lastSequence, 3, 'a cut past the end keeps lastSequence');
    await assert.rejects(store.truncateSteps('unknown', 1, { cursorAgent: 0, cursorStep: 0 }, { epoch: 0 }), withCode('LEASE_LOST'));
  });
}
