import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { checkRows, linkOf, runIdentity, stepDigest } from '../../src/core/history/row-integrity';
import type { StepRecord } from '../../src/contract/checkpoint-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { oldReleaseDbs, V3_RUN_COLUMNS, V3_STEP_COLUMNS } from '../helpers/old-release-db';
import { PREVIOUS_RELEASE, previousReleaseMigrations } from '../helpers/previous-release';
import { cursorAt, newRun, stepRecord } from '../helpers/store-records';

/**
 * Migration V4 (control flow, issue 20) on a database the previous release left: the schema of the
 * first three migrations, a run and its sealed steps inserted with the old column lists. Opening the
 * store applies V4; the old run then loads with `path: null` / `parentRunId: null`, its digests still
 * verify, and it takes new steps with a path.
 */

/** Steps 1..count of the old run, sealed (chained) as the previous release sealed them: no path. */
function oldSteps(count: number): StepRecord[] {
  const run = newRun('old');
  const identity = runIdentity(run);
  const rows: StepRecord[] = [];
  for (let sequence = 1; sequence <= count; sequence++) {
    const { sha256: _placeholder, path: _path, ...rest } = stepRecord('old', sequence);
    rows.push({ ...rest, sha256: stepDigest(rest, {}, { identity, prev: sequence === 1 ? '' : linkOf(rows[sequence - 2]) }) });
  }
  return rows;
}

for (const make of oldReleaseDbs('migration control-flow V4', previousReleaseMigrations)) {
  describe(`migration V4 (control flow) on ${make().label}`, () => {
    it('an old run loads with path and parentRunId null, still verifies, and takes steps with a path', async () => {
      const d = make();
      await d.prepare();
      const store = new TypeOrmCheckpointStore(d.options);
      try {
        // The previous release: three migrations, rows written with its column lists.
        const steps = oldSteps(2);
        const run = newRun('old');
        await d.asOldRelease(async (old) => {
          const at = new Date(1_700_000_000_123);
          await d.insertRun(old, V3_RUN_COLUMNS, run, { status: 'paused', cursorAgent: 0, cursorStep: 2, lastSequence: 2, leaseEpoch: 3, resumeHint: 'resume me', at });
          await d.insertSteps(old, V3_STEP_COLUMNS, steps);
        });

        // This release: init applies V4 (and V5).
        await store.init();
        assert.deepEqual(await d.migrationNames(store), [
          ...PREVIOUS_RELEASE,
          'WaypointControlFlow1767398400000',
          'WaypointStepCursor1767484800000',
          'WaypointRunStreams1767571200000',
          'WaypointStreamBatches1767657600000',
        ]);
        const loaded = (await store.loadRun('old'))!;
        assert.equal(loaded.run.parentRunId, null);
        assert.equal(loaded.run.resumeHint, 'resume me');
        assert.deepEqual(
          loaded.steps,
          steps.map((s) => ({ ...s, path: null })),
        );
        assert.deepEqual(checkRows(loaded.run, loaded.steps, {}), [], 'digests written before V4 still verify');
        assert.equal((await store.getRun('old'))?.parentRunId, null);
        assert.deepEqual(
          (await store.listRuns()).map((r) => [r.runId, r.parentRunId]),
          [['old', null]],
        );

        // The old run goes on, now with a path; a child run is listed under it.
        const grant = (await store.acquireLease('old', 'worker', 60_000))!;
        assert.equal(grant.epoch, 4);
        const { sha256: _s, ...next } = stepRecord('old', 3, { path: 'parallel[1]/Docs/search' });
        const sealed = { ...next, sha256: stepDigest(next, {}, { identity: runIdentity(run), prev: linkOf(steps[1]) }) };
        await store.appendStep({ step: sealed, run: cursorAt(3), fence: { epoch: grant.epoch } });
        await store.createRun(newRun('child', { parentRunId: 'old' }));
        const after = (await store.loadRun('old'))!;
        assert.deepEqual(
          after.steps.map((s) => s.path),
          [null, null, 'parallel[1]/Docs/search'],
        );
        assert.deepEqual(checkRows(after.run, after.steps, {}), []);
        assert.deepEqual(
          (await store.listRuns({ parentRunId: 'old' })).map((r) => r.runId),
          ['child'],
        );

        // A path changed in the database behind the store's back fails its row's check.
        await store.dataSource.query(`UPDATE ${d.table('steps')} SET path = ${d.params(1)} WHERE run_id = 'old' AND sequence = 3`, ['parallel[2]/Docs/search']);
        const tampered = (await store.loadRun('old'))!;
        assert.deepEqual(
          checkRows(tampered.run, tampered.steps, {}).map((p) => p.sequence),
          [3],
        );
        // And so does a path added to a row sealed without one.
        await store.dataSource.query(`UPDATE ${d.table('steps')} SET path = ${d.params(1)} WHERE run_id = 'old' AND sequence = 1`, ['research/step1']);
        const added = (await store.loadRun('old'))!;
        assert.deepEqual(
          checkRows(added.run, added.steps, {}).map((p) => p.sequence),
          [1, 3],
        );
      } finally {
        await store.close();
        await d.cleanup();
      }
    });
  });
}
