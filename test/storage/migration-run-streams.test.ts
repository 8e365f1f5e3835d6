import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { oldReleaseDbs, V4_RUN_COLUMNS, V4_STEP_COLUMNS } from '../helpers/old-release-db';
import { releaseV5Migrations } from '../helpers/previous-release';
import { cursorAt, newRun, stepRecord, withCode } from '../helpers/store-records';

/**
 * Migration V6 (issue 37: run output streams) on a database the previous release (V5) left: additive, so
 * its runs load as written, have an empty stream (offset 0 next), and take fenced events and steps.
 */
for (const make of oldReleaseDbs('migration run-streams V6', releaseV5Migrations)) {
  describe(`migration V6 (run streams) on ${make().label}`, () => {
    it('a V5 run loads as written, its stream is empty, and it takes fenced events from offset 0', async () => {
      const d = make();
      await d.prepare();
      const store = new TypeOrmCheckpointStore(d.options);
      try {
        const steps = [stepRecord('old', 1), stepRecord('old', 2)];
        const at = new Date(1_700_000_000_123);
        await d.asOldRelease(async (old) => {
          await d.insertRun(old, V4_RUN_COLUMNS, newRun('old'), { status: 'running', cursorAgent: 0, cursorStep: 2, lastSequence: 2, leaseEpoch: 3, resumeHint: null, at });
          await d.insertSteps(old, V4_STEP_COLUMNS, steps);
        });
        await store.init();
        assert.deepEqual((await d.migrationNames(store)).slice(-3), ['WaypointStepCursor1767484800000', 'WaypointRunStreams1767571200000', 'WaypointStreamBatches1767657600000']);
        const loaded = (await store.loadRun('old'))!;
        assert.deepEqual(loaded.steps, steps);
        assert.deepEqual([loaded.run.lastSequence, loaded.run.leaseEpoch, loaded.run.updatedAt.getTime()], [2, 3, at.getTime()]);

        assert.equal(await store.streamLength('old'), 0);
        await assert.rejects(store.appendEvents('old', [{ kind: 'status', status: 'running' }], { epoch: 4 }), withCode('LEASE_LOST'));
        const grant = (await store.acquireLease('old', 'worker', 60_000))!;
        assert.equal(await store.appendEvents('old', [{ kind: 'part', step: 'a/s', attempt: 1, data: '"hi"' }], { epoch: grant.epoch }), 0);
        await store.appendStep({ step: stepRecord('old', 3), run: cursorAt(3), fence: { epoch: grant.epoch } });
        assert.deepEqual(
          (await store.readEvents('old', 0, 10)).map((e) => [e.offset, e.kind]),
          [[0, 'part']],
        );
        assert.equal((await store.getRun('old'))!.lastSequence, 3);
      } finally {
        await store.close();
        await d.cleanup();
      }
    });
  });
}
