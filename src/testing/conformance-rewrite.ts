import { strict as assert } from 'node:assert';
import type { CheckpointStore, NewOperation, PayloadRewrite } from '../contract/checkpoint-store';
import type { StoreTest } from './fixture';
import { appendSteps, cursorAt, newRun, sleep, stepRecord } from './store-records';

/**
 * Conformance cases of `rewritePayloads` (the compare-and-swap re-encryption relies on), run by every
 * backend through src/testing/conformance.ts. Payloads carry the characters a JSON or script encoding
 * could get wrong: quotes, backslashes, a field-like `","memory":"`, non-ASCII.
 */
export function rewriteCases(test: StoreTest): void {
  test('rewritePayloads swaps matching payloads of the run row, its steps and operations, and nothing else', async ({ store }) => {
    const epoch = await fullRun(store, 'r1');
    await fullRun(store, 'r2'); // same step payloads as r1: a swap must stay within its run
    const before = (await store.loadRun('r1'))!;
    const otherBefore = { loaded: await store.loadRun('r2'), ops: await store.listOperations('r2') };
    await sleep(5); // an updatedAt bumped by the rewrite would show

    const outcome = await store.rewritePayloads('r1', {
      input: { from: before.run.input, to: 'sealed:input' },
      error: { from: before.run.error!, to: 'sealed:error' },
      steps: [
        { sequence: 1, output: { from: before.steps[0].output, to: TRICKY + ' 1' }, memory: { from: before.steps[0].memory!, to: 'sealed:memory-1' } },
        { sequence: 3, output: { from: TRICKY, to: 'sealed:output-3 ✓' } },
      ],
      operations: [
        { operationKey: 'r1/send', result: { from: '{"id":"msg-1"}', to: 'sealed:result' } },
        { operationKey: 'r1/book', error: { from: '{"message":"503 \\"busy\\""}', to: 'sealed:error-op' } },
      ],
    });
    assert.deepEqual(outcome, { rewritten: 7, skipped: 0 });

    const after = (await store.loadRun('r1'))!;
    assert.deepEqual(after.run, { ...before.run, input: 'sealed:input', error: 'sealed:error' }, 'only the payloads changed: status, lease, cursor, updatedAt as they were');
    assert.deepEqual(after.steps, [{ ...before.steps[0], output: TRICKY + ' 1', memory: 'sealed:memory-1' }, before.steps[1], { ...before.steps[2], output: 'sealed:output-3 ✓' }]);
    assert.deepEqual(await store.listSteps('r1', { fromSequence: 3 }), [after.steps[2]]);
    assert.deepEqual(await store.getRun('r1'), after.run);
    const ops = new Map((await store.listOperations('r1')).map((o) => [o.operationKey, o]));
    assert.deepEqual([ops.get('r1/send')?.result, ops.get('r1/send')?.state, ops.get('r1/send')?.attempts], ['sealed:result', 'committed', 1]);
    assert.deepEqual([ops.get('r1/book')?.error, ops.get('r1/book')?.state], ['sealed:error-op', 'failed']);
    assert.deepEqual(await store.getOperation('r1/send'), ops.get('r1/send'));
    assert.deepEqual({ loaded: await store.loadRun('r2'), ops: await store.listOperations('r2') }, otherBefore, 'the other run is untouched');
    // A second load reads the same (a tiered store may serve it from a copy refilled by the first load).
    await sleep(20);
    assert.deepEqual(await store.loadRun('r1'), after);
    await appendSteps(store, 'r1', epoch, 1, 4); // the holder of the lease goes on at its epoch and sequence
  });

  test('rewritePayloads skips values that changed since they were read (the operation finished, the rows were compacted)', async ({ store }) => {
    const epoch = await fullRun(store, 'r1');
    const read = (await store.loadRun('r1'))!;
    // What happens between the read and the rewrite:
    await store.beginOperation(op('r1', 'r1/book'), { epoch });
    await store.finishOperation('r1/book', { state: 'committed', result: '"booked"' }, { runId: 'r1', epoch });
    await store.updateRun('r1', { error: '{"message":"newer"}' }, { epoch });
    await store.compactSteps('r1', stepRecord('r1', 2, { checkpointId: 'base-2', output: '{"base":true}', memory: null }));
    const changed = (await store.loadRun('r1'))!;
    const changedOps = await store.listOperations('r1');

    const outcome = await store.rewritePayloads('r1', {
      input: { from: read.run.input, to: 'sealed:input' },
      error: { from: read.run.error!, to: 'sealed:error' },
      steps: [
        { sequence: 1, output: { from: read.steps[0].output, to: 'x' }, memory: { from: read.steps[0].memory!, to: 'x' } },
        { sequence: 2, output: { from: read.steps[1].output, to: 'x' } },
        { sequence: 3, output: { from: read.steps[2].output, to: 'sealed:3' } },
        { sequence: 9, output: { from: '{"n":9}', to: 'x' } },
      ],
      operations: [{ operationKey: 'r1/book', error: { from: '{"message":"503 \\"busy\\""}', to: 'x' } }],
    });
    assert.deepEqual(outcome, { rewritten: 2, skipped: 6 });
    const after = (await store.loadRun('r1'))!;
    assert.deepEqual(after, { run: { ...changed.run, input: 'sealed:input' }, steps: [changed.steps[0], { ...changed.steps[1], output: 'sealed:3' }] });
    assert.deepEqual(await store.listOperations('r1'), changedOps, 'the finished operation kept its new record');
  });

  test('rewritePayloads is not fenced, keeps listing order, and touches no other run: unknown runs and foreign operations are skipped', async ({ store }) => {
    await fullRun(store, 'r1');
    await sleep(5);
    const epoch2 = await fullRun(store, 'r2');
    const order = (await store.listRuns()).map((r) => r.runId);
    assert.deepEqual(order, ['r2', 'r1']);
    const r1 = (await store.getRun('r1'))!;
    assert.deepEqual(await store.rewritePayloads('r1', { input: { from: r1.input, to: 'sealed:input' } }), { rewritten: 1, skipped: 0 });
    assert.deepEqual(
      (await store.listRuns()).map((r) => r.runId),
      order,
      'updatedAt did not move',
    );

    const foreign: PayloadRewrite = { operations: [{ operationKey: 'r2/send', result: { from: '{"id":"msg-1"}', to: 'x' } }] };
    assert.deepEqual(await store.rewritePayloads('r1', foreign), { rewritten: 0, skipped: 1 });
    assert.equal((await store.getOperation('r2/send'))?.result, '{"id":"msg-1"}');

    const ghost: PayloadRewrite = { input: { from: '{"ticker":"AAPL"}', to: 'x' }, steps: [{ sequence: 1, output: { from: '{"n":1}', to: 'x' } }], operations: foreign.operations };
    assert.deepEqual(await store.rewritePayloads('nope', ghost), { rewritten: 0, skipped: 3 });
    assert.equal(await store.getRun('nope'), null);
    assert.deepEqual(await store.rewritePayloads('r1', {}), { rewritten: 0, skipped: 0 });
    await appendSteps(store, 'r2', epoch2, 1, 4); // r2's executor was never fenced out
  });
}

/** JSON text a naive encoding would break: escaped quotes, a backslash, a field-like fragment, non-ASCII. */
const TRICKY = '{"t":"a \\" b \\\\ c","f":"\\",\\"memory\\":\\"","u":"ünï 🚀 \u2028"}';

function op(runId: string, key: string): NewOperation {
  return { operationKey: key, runId, stepKey: 'research/step1', name: key.split('/')[1] };
}

/**
 * A run with every kind of payload: input, an error, three steps (memories on 1 and 3, step 3's output
 * tricky), a committed operation (`<run>/send`) and a failed one (`<run>/book`). Returns its lease epoch.
 */
async function fullRun(store: CheckpointStore, runId: string): Promise<number> {
  await store.createRun(newRun(runId, { input: `{"ticker":"AAPL","q":"ünï \\"x\\""}` }));
  const grant = await store.acquireLease(runId, 'worker-a', 60_000);
  assert.ok(grant);
  const { epoch } = grant;
  await appendSteps(store, runId, epoch, 2);
  await store.appendStep({ step: stepRecord(runId, 3, { output: TRICKY }), run: cursorAt(3), fence: { epoch } });
  await store.beginOperation(op(runId, `${runId}/send`), { epoch });
  await store.finishOperation(`${runId}/send`, { state: 'committed', result: '{"id":"msg-1"}' }, { runId, epoch });
  await store.beginOperation(op(runId, `${runId}/book`), { epoch });
  await store.finishOperation(`${runId}/book`, { state: 'failed', error: '{"message":"503 \\"busy\\""}' }, { runId, epoch });
  await store.updateRun(runId, { error: '{"message":"step failed"}' }, { epoch });
  return epoch;
}
