import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import type { StoredStreamEvent } from '../../src/contract/checkpoint-store';
import { tableNames } from '../../src/storage/sql/sql';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { oldReleaseDbs, V4_RUN_COLUMNS } from '../helpers/old-release-db';
import { releaseV6Migrations } from '../helpers/previous-release';
import { newRun } from '../helpers/store-records';

/**
 * Migration V7 (one stream row per append) on a database the V6 release left, with a stream written one
 * row per event: those rows read back through this release's store, before and after new batches are
 * appended behind them, from any offset, and go with `dropStream`.
 */
const V6_EVENT_COLUMNS = ['run_id', '"offset"', 'kind', 'step', 'attempt', 'data', 'status', 'detail', 'created_at'];

const brief = (events: StoredStreamEvent[]) =>
  events.map((e) => [e.offset, e.kind, e.kind === 'part' ? e.data : e.kind === 'status' ? `${e.status}${e.detail ? `:${e.detail}` : ''}` : e.attempt]);

for (const make of oldReleaseDbs('migration stream batches V7', releaseV6Migrations)) {
  describe(`migration V7 (stream batches) on ${make().label}`, () => {
    it('V6 event rows written one per event read back with the batches appended after them, from any offset', async () => {
      const d = make();
      await d.prepare();
      const store = new TypeOrmCheckpointStore(d.options);
      const at = new Date(1_700_000_000_123);
      const events =
        d.label === 'postgres' ? tableNames({ schema: (d.options as { schema: string }).schema, prefix: 'waypoint_' }).events : tableNames({ prefix: 'waypoint_' }).events;
      try {
        await d.asOldRelease(async (old) => {
          await d.insertRun(old, V4_RUN_COLUMNS, newRun('old'), { status: 'running', cursorAgent: 0, cursorStep: 0, lastSequence: 0, leaseEpoch: 3, resumeHint: null, at });
          const rows = [
            [0, 'status', null, null, null, 'running', null],
            [1, 'part', 'a/s', 1, '"he"', null, null],
            [2, 'retract', 'a/s', 1, null, null, null],
            [3, 'status', null, null, null, 'waiting', 'approval'],
          ];
          const date = d.label === 'postgres' ? at : at.getTime();
          for (const row of rows) await old.query(`INSERT INTO ${events} (${V6_EVENT_COLUMNS.join(', ')}) VALUES (${d.params(9)})`, ['old', ...row, date]);
          await old.query(`UPDATE ${d.table('runs')} SET stream_length = 4 WHERE run_id = ${d.params(1)}`, ['old']);
        });
        await store.init();
        assert.deepEqual((await d.migrationNames(store)).slice(-2), ['WaypointRunStreams1767571200000', 'WaypointStreamBatches1767657600000']);
        const before = [
          [0, 'status', 'running'],
          [1, 'part', '"he"'],
          [2, 'retract', 1],
          [3, 'status', 'waiting:approval'],
        ];
        assert.deepEqual(brief(await store.readEvents('old', 0, 100)), before);
        assert.equal((await store.readEvents('old', 1, 1))[0].createdAt.getTime(), at.getTime());
        assert.equal(await store.streamLength('old'), 4);

        const grant = (await store.acquireLease('old', 'worker', 60_000))!;
        const parts = ['"a"', '"b"', '"c"'].map((data) => ({ kind: 'part' as const, step: 'a/s', attempt: 2, data }));
        assert.equal(await store.appendEvents('old', [{ kind: 'status', status: 'running' }, ...parts], { epoch: grant.epoch }), 4);
        const after = [...before, [4, 'status', 'running'], [5, 'part', '"a"'], [6, 'part', '"b"'], [7, 'part', '"c"']];
        assert.deepEqual(brief(await store.readEvents('old', 0, 100)), after);
        for (let from = 0; from <= 8; from++) {
          assert.deepEqual(brief(await store.readEvents('old', from, 100)), after.slice(from), `from ${from}`);
          assert.deepEqual(brief(await store.readEvents('old', from, 2)), after.slice(from, from + 2), `from ${from}, 2 at most`);
        }
        assert.equal(await store.streamLength('old'), 8);
        assert.equal(await store.dropStream('old'), 8);
        assert.deepEqual(await store.readEvents('old', 0, 100), []);
      } finally {
        await store.close();
        await d.cleanup();
      }
    });
  });
}
