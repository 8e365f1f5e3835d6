import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { oldReleaseDbs, V4_RUN_COLUMNS, V4_STEP_COLUMNS, type OldReleaseDb } from '../helpers/old-release-db';
import { releaseV4Migrations } from '../helpers/previous-release';
import { cursorAt, newRun, stepRecord } from '../helpers/store-records';

/**
 * Migration V5 (issue 22: no per-step rewrite of the run row) on a database the previous release (V4) left,
 * and what the new append leaves in the run row. Before V5 every append rewrote the run row's
 * last_sequence, cursor, status and updated_at; from V5 the step row carries the cursor after it, the run
 * row is written only on a status or hint change, and readers derive the live values from the last step.
 */

/** The run row as stored (not as read): what an append did or did not write. */
async function rawRun(
  store: TypeOrmCheckpointStore,
  d: OldReleaseDb,
  runId: string,
): Promise<{ last_sequence: number; cursor_agent: number; cursor_step: number; status: string }> {
  const rows = await store.dataSource.query<
    {
      last_sequence: number;
      cursor_agent: number;
      cursor_step: number;
      status: string;
    }[]
  >(`SELECT last_sequence, cursor_agent, cursor_step, status FROM ${d.table('runs')} WHERE run_id = ${d.params(1)}`, [runId]);
  return { ...rows[0], last_sequence: Number(rows[0].last_sequence), cursor_agent: Number(rows[0].cursor_agent), cursor_step: Number(rows[0].cursor_step) };
}

for (const make of oldReleaseDbs('migration step-cursor V5', releaseV4Migrations)) {
  describe(`migration V5 (step cursor) on ${make().label}`, () => {
    it('a V4 run reads as it was written, then takes steps without its run row being rewritten', async () => {
      const d = make();
      await d.prepare();
      const store = new TypeOrmCheckpointStore(d.options);
      try {
        // The previous release: four migrations; its appends kept the run row's sequence and cursor current.
        const run = newRun('old');
        const at = new Date(1_700_000_000_123);
        const steps = [stepRecord('old', 1), stepRecord('old', 2)];
        await d.asOldRelease(async (old) => {
          await d.insertRun(old, V4_RUN_COLUMNS, run, { status: 'running', cursorAgent: 1, cursorStep: 0, lastSequence: 2, leaseEpoch: 3, resumeHint: null, at });
          await d.insertSteps(old, V4_STEP_COLUMNS, steps);
        });

        await store.init();
        const names = await d.migrationNames(store);
        assert.deepEqual(names.slice(4), ['WaypointStepCursor1767484800000', 'WaypointRunStreams1767571200000', 'WaypointStreamBatches1767657600000']);

        // Read as written: the run row's cursor (the V4 step rows carry none), sequence and updatedAt.
        const loaded = (await store.loadRun('old'))!;
        assert.deepEqual(loaded.steps, steps);
        const asWritten = { lastSequence: 2, cursorAgent: 1, cursorStep: 0, status: 'running', updatedAt: at.getTime() };
        const view = (r: { lastSequence: number; cursorAgent: number; cursorStep: number; status: string; updatedAt: Date }) => ({
          lastSequence: r.lastSequence,
          cursorAgent: r.cursorAgent,
          cursorStep: r.cursorStep,
          status: r.status,
          updatedAt: r.updatedAt.getTime(),
        });
        assert.deepEqual(view(loaded.run), asWritten);
        assert.deepEqual(view((await store.getRun('old'))!), asWritten);
        assert.deepEqual(view((await store.listRuns())[0]), asWritten);

        // New steps: the run reads their cursor and sequence; its stored row is left alone.
        const grant = (await store.acquireLease('old', 'worker', 60_000))!;
        const step3 = stepRecord('old', 3);
        await store.appendStep({ step: step3, run: cursorAt(0, { cursorAgent: 2 }), fence: { epoch: grant.epoch } });
        const after3 = view((await store.getRun('old'))!);
        assert.deepEqual(after3, { lastSequence: 3, cursorAgent: 2, cursorStep: 0, status: 'running', updatedAt: step3.completedAt.getTime() });
        assert.deepEqual(view((await store.loadRun('old'))!.run), after3);
        assert.deepEqual(view((await store.listRuns({ since: step3.completedAt }))[0]), after3, 'listRuns filters and sorts on the derived updatedAt');
        assert.deepEqual(await rawRun(store, d, 'old'), { last_sequence: 2, cursor_agent: 1, cursor_step: 0, status: 'running' }, 'the run row was not rewritten');

        // Stale appends are refused as before: the same sequence again, a gap, an old epoch.
        for (const [sequence, epoch] of [
          [3, grant.epoch],
          [5, grant.epoch],
          [4, grant.epoch - 1],
        ] as const) {
          await assert.rejects(
            store.appendStep({ step: stepRecord('old', sequence), run: cursorAt(1), fence: { epoch } }),
            (e: { code?: string }) => e.code === 'LEASE_LOST',
            `sequence ${sequence} epoch ${epoch}`,
          );
        }
        assert.equal((await store.listSteps('old')).length, 3);

        // A transition writes the run row, once.
        await store.appendStep({ step: stepRecord('old', 4), run: cursorAt(1, { cursorAgent: 2, status: 'waiting', resumeHint: 'send it' }), fence: { epoch: grant.epoch } });
        assert.deepEqual(await rawRun(store, d, 'old'), { last_sequence: 4, cursor_agent: 2, cursor_step: 1, status: 'waiting' });
        assert.equal((await store.getRun('old'))!.resumeHint, 'send it');
        await store.appendStep({ step: stepRecord('old', 5), run: cursorAt(2, { cursorAgent: 2 }), fence: { epoch: grant.epoch } });
        const resumed = (await store.getRun('old'))!;
        assert.deepEqual([resumed.status, resumed.resumeHint, resumed.lastSequence, resumed.cursorStep], ['running', null, 5, 2]);
        await store.appendStep({ step: stepRecord('old', 6), run: cursorAt(3, { cursorAgent: 2 }), fence: { epoch: grant.epoch } });
        assert.deepEqual(await rawRun(store, d, 'old'), { last_sequence: 5, cursor_agent: 2, cursor_step: 2, status: 'running' }, 'running again: step 6 left the row');
        // Any other write of the run row pins it to its last step: a run at rest names its last row, so a deleted tail shows.
        await store.updateRun('old', { status: 'paused' }, { epoch: grant.epoch });
        assert.deepEqual(await rawRun(store, d, 'old'), { last_sequence: 6, cursor_agent: 2, cursor_step: 3, status: 'paused' });
        assert.deepEqual(view((await store.getRun('old'))!).lastSequence, 6);

        // A truncation and a patched cursor set the run row's cursor, which then wins over the steps'.
        await store.truncateSteps('old', 6, { cursorAgent: 0, cursorStep: 9 }, { epoch: grant.epoch });
        assert.deepEqual([(await store.getRun('old'))!.lastSequence, (await store.getRun('old'))!.cursorAgent, (await store.getRun('old'))!.cursorStep], [5, 0, 9]);
        await store.appendStep({ step: stepRecord('old', 6), run: cursorAt(4, { cursorAgent: 3 }), fence: { epoch: grant.epoch } });
        await store.updateRun('old', { cursorAgent: 7, cursorStep: 1 }, null);
        const patched = (await store.getRun('old'))!;
        assert.deepEqual([patched.lastSequence, patched.cursorAgent, patched.cursorStep], [6, 7, 1]);
      } finally {
        await store.close();
        await d.cleanup();
      }
    });
  });
}
