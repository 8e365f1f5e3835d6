import { strict as assert } from 'node:assert';
import { checkRows, linkOf, runIdentity, stepDigest } from '../core/history/row-integrity';
import { supportsTransactions, type CheckpointStore, type StepRecord } from '../contract/checkpoint-store';
import type { StoreTest } from './fixture';
import { cursorAt, newRun, stepRecord } from './store-records';

/**
 * Conformance cases of the control-flow fields (issue 20): a step row's `path` and a run's
 * `parentRunId`, stored, returned and filtered by every backend.
 */

/** A path of exactly 1,000 characters, mixing ASCII, accents, astral characters and separators. */
export const LONG_PATH = (() => {
  const unit = 'forEach(reviews)[17]/Ŕévïewér-🚀/review/';
  let path = '';
  while (path.length < 1000) path += unit;
  // Cut on a code-point boundary, then pad with ASCII to exactly 1,000 UTF-16 units.
  path = Array.from(path).reduce((acc, ch) => (acc.length + ch.length <= 1000 ? acc + ch : acc), '');
  return path.padEnd(1000, 'x');
})();

async function leased(store: CheckpointStore, runId: string): Promise<number> {
  const grant = await store.acquireLease(runId, 'worker-a', 60_000);
  assert.ok(grant, `lease on ${runId}`);
  return grant.epoch;
}

/** Rows 1..paths.length of `runId`, each sealed in the chained format as the runtime seals them. */
function sealedRows(run: { runId: string; pipelineName: string; input: string }, paths: (string | null)[]): StepRecord[] {
  const identity = runIdentity(run);
  const rows: StepRecord[] = [];
  paths.forEach((path, i) => {
    const { sha256: _placeholder, ...rest } = stepRecord(run.runId, i + 1, { path });
    const prev = i === 0 ? '' : linkOf(rows[i - 1]);
    rows.push({ ...rest, sha256: stepDigest(rest, {}, { identity, prev }) });
  });
  return rows;
}

export function controlFlowCases(test: StoreTest): void {
  test('appendRun: consecutive steps of one run land together, in order, with the last cursor', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const epoch = await leased(store, 'r1');
    const first = stepRecord('r1', 1, { path: 'parallel[0]/A/a' });
    await store.appendStep({ step: first, run: cursorAt(1), fence: { epoch } });
    const batch = [2, 3, 4].map((sequence) => stepRecord('r1', sequence, { path: `forEach(x)[${sequence}]/B/b` }));
    await store.appendRun(batch.map((step) => ({ step, run: cursorAt(step.sequence), fence: { epoch } })));
    const loaded = await store.loadRun('r1');
    assert.deepEqual(loaded?.steps, [first, ...batch]);
    assert.equal(loaded?.run.lastSequence, 4);
    assert.deepEqual([loaded?.run.cursorAgent, loaded?.run.cursorStep], [cursorAt(4).cursorAgent, cursorAt(4).cursorStep]);
  });

  test('appendRun: a stale fence or a sequence gap writes nothing of the batch', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const epoch = await leased(store, 'r1');
    const stale = [1, 2].map((sequence) => stepRecord('r1', sequence));
    await assert.rejects(store.appendRun(stale.map((step) => ({ step, run: cursorAt(step.sequence), fence: { epoch: epoch + 1 } }))), { code: 'LEASE_LOST' });
    const gap = [2, 3].map((sequence) => stepRecord('r1', sequence));
    await assert.rejects(store.appendRun(gap.map((step) => ({ step, run: cursorAt(step.sequence), fence: { epoch } }))), { code: 'LEASE_LOST' });
    const loaded = await store.loadRun('r1');
    assert.deepEqual(loaded?.steps, []);
    assert.equal(loaded?.run.lastSequence, 0);
  });

  test('path: set (short, 1,000 characters, unicode) and null round-trip through appendStep, loadRun and listSteps', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const epoch = await leased(store, 'r1');
    const paths = ['parallel[1]/Docs/search', LONG_PATH, null, 'forEach(ßüñ ✓ 𝄞)[0]/Agent/step \\ " \' \n'];
    const steps = paths.map((path, i) => stepRecord('r1', i + 1, { path }));
    for (const step of steps) await store.appendStep({ step, run: cursorAt(step.sequence), fence: { epoch } });
    const loaded = await store.loadRun('r1');
    assert.deepEqual(loaded?.steps, steps);
    assert.equal(loaded?.steps[1]?.path?.length, 1000);
    assert.deepEqual(await store.listSteps('r1', { fromSequence: 2, toSequence: 3 }), steps.slice(1, 3));
  });

  test('path: a step appended without the field reads back as path null', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const epoch = await leased(store, 'r1');
    const { path: _absent, ...step } = stepRecord('r1', 1);
    await store.appendStep({ step, run: cursorAt(1), fence: { epoch } });
    const [loaded] = (await store.loadRun('r1'))!.steps;
    assert.equal(loaded?.path, null);
    assert.deepEqual(loaded, { ...step, path: null });
  });

  test('path: survives compactSteps (a base row with a path replaces the rows before it)', async ({ store }) => {
    await store.createRun(newRun('r1'));
    const epoch = await leased(store, 'r1');
    for (let sequence = 1; sequence <= 3; sequence++) {
      await store.appendStep({ step: stepRecord('r1', sequence, { path: `parallel[${sequence}]/A/s` }), run: cursorAt(sequence), fence: { epoch } });
    }
    const base = stepRecord('r1', 2, { agentId: '$waypoint', stepName: 'base', status: 'skipped', path: 'decision/if(approved)' });
    await store.compactSteps('r1', base);
    const steps = (await store.loadRun('r1'))!.steps;
    assert.deepEqual(
      steps.map((s) => s.path),
      ['decision/if(approved)', 'parallel[3]/A/s'],
    );
  });

  test('path: round-trips through a transaction appendStep (where the backend has transactions)', async ({ store }) => {
    if (!supportsTransactions(store)) return; // memory and Redis: no transactions (TransactionsUnsupportedError)
    await store.createRun(newRun('r1'));
    const epoch = await leased(store, 'r1');
    const withPath = stepRecord('r1', 1, { path: LONG_PATH });
    const withoutPath = stepRecord('r1', 2, { path: null });
    for (const step of [withPath, withoutPath]) {
      const tx = await store.beginTransaction('r1', { epoch });
      try {
        await tx.appendStep({ step, run: cursorAt(step.sequence), fence: { epoch } });
        await tx.commit();
      } finally {
        await tx.rollback();
      }
    }
    assert.deepEqual((await store.loadRun('r1'))!.steps, [withPath, withoutPath]);
  });

  test('path: rows sealed with a path pass the integrity check; a path changed after sealing fails it', async ({ store }) => {
    const run = newRun('r1');
    await store.createRun(run);
    const epoch = await leased(store, 'r1');
    const rows = sealedRows(run, ['parallel[0]/Docs/search', null, LONG_PATH]);
    for (const step of rows) await store.appendStep({ step, run: cursorAt(step.sequence), fence: { epoch } });
    const loaded = (await store.loadRun('r1'))!;
    assert.deepEqual(checkRows(loaded.run, loaded.steps, {}), []);

    // The same rows on another run, stored with row 1's path cleared and row 2's path changed after
    // sealing: each fails its own digest (row 3, chained to row 2's unchanged digest, still passes).
    const other = newRun('r2', { input: run.input });
    await store.createRun(other);
    const epoch2 = await leased(store, 'r2');
    const tampered = sealedRows(other, ['parallel[0]/Docs/search', null, LONG_PATH]);
    tampered[0] = { ...tampered[0], path: null };
    tampered[1] = { ...tampered[1], path: 'parallel[1]/Docs/search' };
    for (const step of tampered) await store.appendStep({ step, run: cursorAt(step.sequence), fence: { epoch: epoch2 } });
    const bad = (await store.loadRun('r2'))!;
    const problems = checkRows(bad.run, bad.steps, {});
    assert.deepEqual(
      problems.map((p) => [p.sequence, p.error.code]),
      [
        [1, 'CHECKPOINT_CORRUPTED'],
        [2, 'CHECKPOINT_CORRUPTED'],
      ],
    );
    assert.match(problems[0].error.message, /does not match/);
  });

  test('parentRunId: createRun stores it; getRun, loadRun and listRuns return it; a top-level run has null', async ({ store }) => {
    const parent = await store.createRun(newRun('parent'));
    assert.equal(parent.run.parentRunId, null);
    const child = await store.createRun(newRun('child', { parentRunId: 'parent' }));
    assert.equal(child.created, true);
    assert.equal(child.run.parentRunId, 'parent');
    assert.deepEqual(await store.getRun('child'), child.run);
    assert.deepEqual((await store.loadRun('child'))?.run, child.run);
    assert.equal((await store.getRun('parent'))?.parentRunId, null);
    const listed = await store.listRuns();
    assert.equal(listed.find((r) => r.runId === 'child')?.parentRunId, 'parent');
    assert.equal(listed.find((r) => r.runId === 'parent')?.parentRunId, null);
    // Insert-if-absent: a second create with another parent changes nothing.
    const again = await store.createRun(newRun('child', { parentRunId: 'other' }));
    assert.equal(again.created, false);
    assert.equal(again.run.parentRunId, 'parent');
  });

  test('parentRunId: a child keeps its parent through appends, updates, leases and cancellation', async ({ store }) => {
    await store.createRun(newRun('child', { parentRunId: 'p-ünï-🚀' }));
    const epoch = await leased(store, 'child');
    await store.appendStep({ step: stepRecord('child', 1, { path: 'forEach(items)[0]/A/s' }), run: cursorAt(1), fence: { epoch } });
    await store.updateRun('child', { status: 'paused', resumeHint: 'later' }, { epoch });
    assert.equal((await store.getRun('child'))?.parentRunId, 'p-ünï-🚀');
    assert.equal((await store.cancelRun('child', 'stop'))?.parentRunId, 'p-ünï-🚀');
  });

  test('listRuns({ parentRunId }) returns exactly the children, with the other filters and limit', async ({ store }) => {
    await store.createRun(newRun('p1'));
    await store.createRun(newRun('p2'));
    const ids = ['c1', 'c2', 'c3', 'c4'];
    for (const id of ids) await store.createRun(newRun(id, { parentRunId: 'p1', pipelineName: id === 'c4' ? 'other-pipeline' : 'review' }));
    await store.createRun(newRun('d1', { parentRunId: 'p2', pipelineName: 'review' }));
    // A grandchild: a child of c1, not of p1.
    await store.createRun(newRun('g1', { parentRunId: 'c1', pipelineName: 'review' }));
    const epoch = await leased(store, 'c2');
    await store.updateRun('c2', { status: 'completed' }, { epoch });

    const byId = (runs: { runId: string }[]) => runs.map((r) => r.runId).sort();
    assert.deepEqual(byId(await store.listRuns({ parentRunId: 'p1' })), ['c1', 'c2', 'c3', 'c4']);
    assert.deepEqual(byId(await store.listRuns({ parentRunId: 'p2' })), ['d1']);
    assert.deepEqual(byId(await store.listRuns({ parentRunId: 'c1' })), ['g1']);
    assert.deepEqual(await store.listRuns({ parentRunId: 'nobody' }), []);
    assert.deepEqual(byId(await store.listRuns({ parentRunId: 'p1', status: 'completed' })), ['c2']);
    assert.deepEqual(byId(await store.listRuns({ parentRunId: 'p1', status: ['running', 'paused'] })), ['c1', 'c3', 'c4']);
    assert.deepEqual(byId(await store.listRuns({ parentRunId: 'p1', pipelineName: 'other-pipeline' })), ['c4']);
    assert.deepEqual(byId(await store.listRuns({ parentRunId: 'p1', since: new Date(Date.now() + 60_000) })), []);

    // Newest first, like every listing; the limit keeps the newest.
    const all = await store.listRuns({ parentRunId: 'p1' });
    for (let i = 1; i < all.length; i++) assert.ok(all[i - 1].updatedAt.getTime() >= all[i].updatedAt.getTime(), 'newest first');
    const two = await store.listRuns({ parentRunId: 'p1', limit: 2 });
    assert.deepEqual(
      two.map((r) => r.runId),
      all.slice(0, 2).map((r) => r.runId),
    );
    assert.ok(two.every((r) => r.parentRunId === 'p1'));
  });

  test('listRuns({ parentRunId }): a deleted child is no longer listed', async ({ store }) => {
    await store.createRun(newRun('c1', { parentRunId: 'p1' }));
    await store.createRun(newRun('c2', { parentRunId: 'p1' }));
    await store.deleteRun('c1');
    assert.deepEqual(
      (await store.listRuns({ parentRunId: 'p1' })).map((r) => r.runId),
      ['c2'],
    );
    // The id reused for a top-level run is not a child any more.
    await store.deleteRun('c2');
    await store.createRun(newRun('c2'));
    assert.deepEqual(await store.listRuns({ parentRunId: 'p1' }), []);
  });
}
