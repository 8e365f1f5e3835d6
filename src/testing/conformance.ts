import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { controlFlowCases } from './conformance-control-flow';
import { leaseAndOperationCases } from './conformance-leases';
import { rewriteCases } from './conformance-rewrite';
import { streamCases } from './conformance-stream';
import type { StoreConformanceOptions, StoreTest } from './fixture';
import { assertRecent, appendSteps, cursorAt, leasedRun, newRun, sleep, stepRecord, withCode } from './store-records';

/**
 * The checkpoint store conformance suite, written once against the contract and run by every backend
 * (ours and yours) with a few-line test file: lifecycle, runs, steps, leases and fencing, the
 * committed-operations log, cancel/compact/truncate, payload rewrite, control-flow fields. It registers
 * `describe`/`it` blocks of `node:test`, so call it at the top level of a test file and run the file with
 * `node --test`. `makeStore` gets the full test name so a backend can isolate each test by it (a schema,
 * table prefix or key prefix named from its hash).
 *
 * @example
 * import { runStoreConformance } from 'waypoint-durable/testing';
 * runStoreConformance({
 *   name: 'dynamodb',
 *   makeStore: async (testName) => {
 *     const store = new DynamoCheckpointStore({ table: `waypoint-${hash(testName)}` });
 *     return { store, cleanup: () => dropTableAndClose(store), sibling: () => new DynamoCheckpointStore({ table: `waypoint-${hash(testName)}` }) };
 *   },
 * });
 */
export function runStoreConformance(options: StoreConformanceOptions): void {
  const { name, makeStore } = options;
  const test: StoreTest = (title, fn) => {
    it(title, async () => {
      const fx = await makeStore(`${name} conformance: ${title}`);
      try {
        if (!title.startsWith('init:')) await fx.store.init(); // 'init:' cases initialize the store themselves
        await fn(fx);
      } finally {
        await fx.cleanup();
      }
    });
  };

  describe(`${name}: checkpoint store conformance`, () => {
    describe('lifecycle', () => lifecycleCases(test, options.processLocal === true));
    describe('runs', () => runCases(test));
    describe('steps', () => stepCases(test));
    leaseAndOperationCases(test);
    describe('payload rewrite', () => rewriteCases(test));
    describe('control flow: step path and parent run', () => controlFlowCases(test));
    describe('run output stream (optional capability)', () => streamCases(test));
  });
}

function lifecycleCases(test: StoreTest, processLocal: boolean): void {
  test('init: twice, and concurrently, is idempotent', async ({ store }) => {
    await store.init();
    await store.init();
    await Promise.all([store.init(), store.init()]);
    assert.equal((await store.createRun(newRun('r1'))).created, true);
  });

  // A process-local backend has no database to share, so the case does not apply (it is not registered).
  if (!processLocal)
    test('init: two stores on a fresh database initialize concurrently and share it', async ({ store, sibling }) => {
      assert.ok(sibling, 'a shared backend must provide sibling() to open a second store on the same database');
      const other = sibling();
      await Promise.all([store.init(), other.init()]);
      await store.createRun(newRun('shared'));
      assert.equal((await other.getRun('shared'))?.runId, 'shared');
    });

  // The contract does not promise init() after close(); only that closing is safe and data is durable.
  test('close: resolves, twice; the data outlives the store', async ({ store, sibling }) => {
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 2);
    const before = await store.loadRun('r1');
    await store.close();
    await store.close();
    if (!sibling) return;
    const reopened = sibling();
    await reopened.init();
    assert.deepEqual(await reopened.loadRun('r1'), before);
    await appendSteps(reopened, 'r1', epoch, 1, 3); // the lease (epoch) is data too
  });
}

function runCases(test: StoreTest): void {
  test('createRun inserts a fresh run with defaults', async ({ store }) => {
    const { run, created } = await store.createRun(newRun('r1'));
    assert.equal(created, true);
    const { createdAt, updatedAt, ...rest } = run;
    assert.deepEqual(rest, {
      ...newRun('r1'),
      status: 'running',
      cursorAgent: 0,
      cursorStep: 0,
      lastSequence: 0,
      leaseOwner: null,
      leaseEpoch: 0,
      leaseExpiresAt: null,
      error: null,
      resumeHint: null,
      parentRunId: null,
    });
    assertRecent(createdAt, 'createdAt');
    assert.equal(updatedAt.getTime(), createdAt.getTime());
    assert.deepEqual(await store.getRun('r1'), run);
  });

  test('createRun is insert-if-absent: a second call returns the original, created: false', async ({ store }) => {
    const first = await store.createRun(newRun('r1'));
    const second = await store.createRun(newRun('r1', { input: '{"ticker":"MSFT"}', pipelineVersion: '9.9.9' }));
    assert.equal(second.created, false);
    assert.deepEqual(second.run, first.run);
  });

  test('createRun is race-safe: concurrent calls create exactly once', async ({ store, sibling }) => {
    const stores = [store];
    if (sibling) {
      const other = sibling();
      await other.init();
      stores.push(other);
    }
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => stores[i % stores.length].createRun(newRun('race'))));
    assert.equal(results.filter((r) => r.created).length, 1);
    for (const r of results) assert.deepEqual(r.run, results[0].run);
  });

  test('getRun and loadRun return null for an unknown run', async ({ store }) => {
    assert.equal(await store.getRun('nope'), null);
    assert.equal(await store.loadRun('nope'), null);
    assert.deepEqual(await store.listSteps('nope'), []);
  });

  test('payloads round-trip byte-exact: unicode and 1 MB', async ({ store }) => {
    const unicode = JSON.stringify({ t: 'ünïcödé ✓ 𝄞 🚀 中文 עברית e\u0301 \\ " \' \n\t', z: '\u2028\u2029' });
    const big = JSON.stringify({ blob: 'x'.repeat(1024 * 1024), tail: '🚀'.repeat(1000) });
    const { run } = await store.createRun(newRun('r1', { input: big, metadata: unicode }));
    assert.equal(run.input, big);
    const epoch = (await store.acquireLease('r1', 'w', 60_000))!.epoch;
    const step = stepRecord('r1', 1, { output: big, memory: unicode, stepName: 'étape-✓' });
    await store.appendStep({ step, run: cursorAt(1), fence: { epoch } });
    const loaded = await store.loadRun('r1');
    assert.equal(loaded?.run.input, big);
    assert.equal(loaded?.run.metadata, unicode);
    assert.equal(loaded?.steps[0]?.output, big);
    assert.equal(loaded?.steps[0]?.memory, unicode);
    assert.deepEqual(loaded?.steps[0], step);
  });

  test('updateRun without a fence patches only the given fields and bumps updatedAt', async ({ store }) => {
    const { run } = await store.createRun(newRun('r1'));
    await sleep(5);
    await store.updateRun('r1', { status: 'failed', error: '{"message":"boom"}', resumeHint: 'fix it' }, null);
    const after = (await store.getRun('r1'))!;
    assert.deepEqual(
      { status: after.status, error: after.error, resumeHint: after.resumeHint, cursorStep: after.cursorStep },
      { status: 'failed', error: '{"message":"boom"}', resumeHint: 'fix it', cursorStep: 0 },
    );
    assert.ok(after.updatedAt.getTime() > run.updatedAt.getTime(), 'updatedAt moved');
    assert.deepEqual(after.createdAt, run.createdAt);
    await store.updateRun('r1', { error: null, cursorAgent: 2, cursorStep: 1, pipelineVersion: '2.2.0' }, null);
    const cleared = (await store.getRun('r1'))!;
    assert.deepEqual(
      [cleared.error, cleared.status, cleared.cursorAgent, cleared.cursorStep, cleared.pipelineVersion, cleared.resumeHint],
      [null, 'failed', 2, 1, '2.2.0', 'fix it'],
    );
    await store.updateRun('unknown', { status: 'paused' }, null); // a no-op, not an error
    assert.equal(await store.getRun('unknown'), null);
  });

  test('updateRun with a fence applies only at the current epoch', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    await store.updateRun('r1', { status: 'paused' }, { epoch });
    assert.equal((await store.getRun('r1'))?.status, 'paused');
    const before = await store.getRun('r1');
    await assert.rejects(store.updateRun('r1', { status: 'completed' }, { epoch: epoch + 1 }), withCode('LEASE_LOST'));
    await assert.rejects(store.updateRun('r1', { status: 'completed' }, { epoch: epoch - 1 }), withCode('LEASE_LOST'));
    await assert.rejects(store.updateRun('unknown', { status: 'completed' }, { epoch }), withCode('LEASE_LOST'));
    assert.deepEqual(await store.getRun('r1'), before);
  });

  test('listRuns filters by status(es), pipeline and since, newest first, with a limit', async ({ store }) => {
    for (const [id, pipeline] of [
      ['a', 'p1'],
      ['b', 'p2'],
      ['c', 'p1'],
      ['d', 'p1'],
    ] as const) {
      await store.createRun(newRun(id, { pipelineName: pipeline }));
      await sleep(5);
    }
    await store.updateRun('b', { status: 'completed' }, null);
    await sleep(5);
    await store.updateRun('a', { status: 'failed' }, null); // a is now the most recently updated
    const ids = (runs: { runId: string }[]) => runs.map((r) => r.runId);
    assert.deepEqual(ids(await store.listRuns()), ['a', 'b', 'd', 'c']);
    assert.deepEqual(ids(await store.listRuns({ status: 'running' })), ['d', 'c']);
    assert.deepEqual(ids(await store.listRuns({ status: ['completed', 'failed'] })), ['a', 'b']);
    assert.deepEqual(ids(await store.listRuns({ status: [] })), []);
    assert.deepEqual(ids(await store.listRuns({ pipelineName: 'p1' })), ['a', 'd', 'c']);
    assert.deepEqual(ids(await store.listRuns({ pipelineName: 'p1', status: 'running', limit: 1 })), ['d']);
    const b = (await store.getRun('b'))!;
    assert.deepEqual(ids(await store.listRuns({ since: b.updatedAt })), ['a', 'b']);
    assert.deepEqual(ids(await store.listRuns({ limit: 2 })), ['a', 'b']);
    assert.deepEqual(await store.listRuns({ pipelineName: 'none' }), []);
  });

  test('deleteRun removes the run, its steps and its operations, and nothing else', async ({ store }) => {
    for (const id of ['r1', 'r2']) {
      const epoch = await leasedRun(store, id);
      await appendSteps(store, id, epoch, 2);
      await store.beginOperation({ operationKey: `${id}/op`, runId: id, stepKey: 'research/step1', name: 'send' }, { epoch });
    }
    await store.deleteRun('r1');
    assert.equal(await store.getRun('r1'), null);
    assert.equal(await store.loadRun('r1'), null);
    assert.deepEqual(await store.listSteps('r1'), []);
    assert.deepEqual(await store.listOperations('r1'), []);
    assert.equal(await store.getOperation('r1/op'), null);
    assert.equal((await store.loadRun('r2'))?.steps.length, 2);
    assert.equal((await store.listOperations('r2')).length, 1);
    await store.deleteRun('unknown');
    // The id is free again.
    assert.equal((await store.createRun(newRun('r1'))).created, true);
  });
}

function stepCases(test: StoreTest): void {
  test('appendStep records the step and moves cursor, status and lastSequence with it', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    const before = (await store.getRun('r1'))!;
    await sleep(5);
    const step = stepRecord('r1', 1);
    await store.appendStep({ step, run: { cursorAgent: 1, cursorStep: 0, status: 'waiting', resumeHint: 'send the signal' }, fence: { epoch } });
    const { run, steps } = (await store.loadRun('r1'))!;
    assert.deepEqual(steps, [step]);
    assert.deepEqual([run.lastSequence, run.cursorAgent, run.cursorStep, run.status, run.resumeHint], [1, 1, 0, 'waiting', 'send the signal']);
    assert.ok(run.updatedAt.getTime() > before.updatedAt.getTime(), 'updatedAt moved');
    assert.equal(run.leaseEpoch, epoch);
  });

  test('appendStep moves a run stored paused, or with another hint, back to running with the hint asked', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    await store.updateRun('r1', { status: 'paused', resumeHint: 'paused by SIGTERM at step 1' }, { epoch });
    await store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch } });
    const first = (await store.getRun('r1'))!;
    assert.deepEqual([first.status, first.resumeHint, first.lastSequence], ['running', null, 1]);
    // A hint the run keeps while running: written by the first append that asks for it, kept by the next.
    await store.appendStep({ step: stepRecord('r1', 2), run: cursorAt(2, { resumeHint: 'waiting on review' }), fence: { epoch } });
    await store.appendStep({ step: stepRecord('r1', 3), run: cursorAt(3, { resumeHint: 'waiting on review' }), fence: { epoch } });
    const kept = (await store.getRun('r1'))!;
    assert.deepEqual([kept.status, kept.resumeHint, kept.lastSequence, kept.cursorStep], ['running', 'waiting on review', 3, 3]);
    await store.appendStep({ step: stepRecord('r1', 4), run: cursorAt(4), fence: { epoch } });
    assert.equal((await store.getRun('r1'))!.resumeHint, null, 'and dropped by the first that does not');
    // Stale fences and sequences are refused whichever way the run row stands.
    await store.updateRun('r1', { status: 'paused', resumeHint: 'paused again' }, { epoch });
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 6), run: cursorAt(6), fence: { epoch } }), withCode('LEASE_LOST'));
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 5), run: cursorAt(5), fence: { epoch: epoch + 1 } }), withCode('LEASE_LOST'));
    const after = (await store.getRun('r1'))!;
    assert.deepEqual([after.status, after.resumeHint, after.lastSequence], ['paused', 'paused again', 4]);
    assert.deepEqual(
      (await store.listSteps('r1')).map((step) => step.sequence),
      [1, 2, 3, 4],
    );
  });

  test('appendStep rejects a stale epoch with LEASE_LOST and changes nothing', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 1);
    const before = await store.loadRun('r1');
    const stale = { step: stepRecord('r1', 2), run: cursorAt(2), fence: { epoch: epoch - 1 } };
    await assert.rejects(store.appendStep(stale), withCode('LEASE_LOST'));
    await assert.rejects(store.appendStep({ ...stale, fence: { epoch: epoch + 1 } }), withCode('LEASE_LOST'));
    assert.deepEqual(await store.loadRun('r1'), before);
  });

  test('appendStep rejects a gap or a duplicate sequence and changes nothing', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 2);
    const before = await store.loadRun('r1');
    for (const sequence of [4, 2, 1, 0]) {
      const append = { step: stepRecord('r1', sequence, { output: '"other"' }), run: cursorAt(9), fence: { epoch } };
      await assert.rejects(store.appendStep(append), withCode('LEASE_LOST'), `sequence ${sequence}`);
    }
    assert.deepEqual(await store.loadRun('r1'), before);
    await appendSteps(store, 'r1', epoch, 1, 3); // the next one in line still goes through
  });

  test('appendStep on an unknown run is rejected', async ({ store }) => {
    await assert.rejects(store.appendStep({ step: stepRecord('nope', 1), run: cursorAt(1), fence: { epoch: 0 } }), withCode('LEASE_LOST'));
    assert.equal(await store.getRun('nope'), null);
  });

  test('loadRun returns every step in sequence order; dates, booleans and nulls exact', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    const steps = await appendSteps(store, 'r1', epoch, 5);
    const odd = stepRecord('r1', 6, {
      status: 'skipped',
      memory: null,
      sideEffectsCommitted: true,
      startedAt: new Date('2024-02-29T23:59:59.999Z'),
      completedAt: new Date(Date.UTC(1999, 11, 31, 23, 59, 59, 1)),
      attempt: 7,
      agentIndex: 3,
    });
    await store.appendStep({ step: odd, run: cursorAt(6, { status: 'failed' }), fence: { epoch } });
    const loaded = (await store.loadRun('r1'))!;
    assert.deepEqual(loaded.steps, [...steps, odd]);
    assert.equal(loaded.steps[5].startedAt.getTime(), odd.startedAt.getTime());
    assert.equal(loaded.run.status, 'failed');
  });

  test('listSteps returns the inclusive range, ordered', async ({ store }) => {
    const epoch = await leasedRun(store, 'r1');
    const steps = await appendSteps(store, 'r1', epoch, 6);
    const seqs = async (range?: { fromSequence?: number; toSequence?: number }) => (await store.listSteps('r1', range)).map((s) => s.sequence);
    assert.deepEqual(await store.listSteps('r1'), steps);
    assert.deepEqual(await seqs({ fromSequence: 4 }), [4, 5, 6]);
    assert.deepEqual(await seqs({ toSequence: 2 }), [1, 2]);
    assert.deepEqual(await seqs({ fromSequence: 2, toSequence: 4 }), [2, 3, 4]);
    assert.deepEqual(await seqs({ fromSequence: 3, toSequence: 3 }), [3]);
    assert.deepEqual(await seqs({ fromSequence: 5, toSequence: 2 }), []);
    assert.deepEqual(await seqs({ fromSequence: 7 }), []);
  });
}
