import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { StoredStreamEvent } from '../../src/contract/checkpoint-store';
import { RedisCheckpointStore } from '../../src/storage/redis/redis-store';
import { deleteKeysUnder, REDIS_TEST_URL } from '../lease/backends';
import { newRun } from '../helpers/store-records';

/**
 * Redis stream entries written one per event by the release before batches (fields k, s, a, d, st, dt,
 * t; id `<offset + 1>-0`) read back through this release's store, before and after the batches it
 * appends behind them (one entry per append), from any offset; and the stored form is one entry per append.
 */
const brief = (events: StoredStreamEvent[]) =>
  events.map((e) => [e.offset, e.kind, e.kind === 'part' ? e.data : e.kind === 'status' ? `${e.status}${e.detail ? `:${e.detail}` : ''}` : e.attempt]);

describe('redis: stream entries of the per-event shape and batches', () => {
  it('old per-event entries read back with the batches appended after them, from any offset', async () => {
    const prefix = `wpt-stream-batches:${randomUUID().slice(0, 8)}:`;
    const store = new RedisCheckpointStore({ url: REDIS_TEST_URL, keyPrefix: prefix });
    const admin = new Redis(REDIS_TEST_URL);
    try {
      await store.createRun(newRun('old'));
      const key = `${prefix}run:{old}:events`;
      const t = '1700000000123';
      await admin.xadd(key, '1-0', 't', t, 'k', 'status', 'st', 'running');
      await admin.xadd(key, '2-0', 't', t, 'k', 'part', 's', 'a/s', 'a', '1', 'd', '"he"');
      await admin.xadd(key, '3-0', 't', t, 'k', 'retract', 's', 'a/s', 'a', '1');
      await admin.xadd(key, '4-0', 't', t, 'k', 'status', 'st', 'waiting', 'dt', 'approval');
      const before = [
        [0, 'status', 'running'],
        [1, 'part', '"he"'],
        [2, 'retract', 1],
        [3, 'status', 'waiting:approval'],
      ];
      assert.deepEqual(brief(await store.readEvents('old', 0, 100)), before);
      assert.equal((await store.readEvents('old', 1, 1))[0].createdAt.getTime(), 1_700_000_000_123);
      assert.equal(await store.streamLength('old'), 4);

      const parts = ['"a"', '"b"', '"c"'].map((data) => ({ kind: 'part' as const, step: 'a/s', attempt: 2, data }));
      assert.equal(await store.appendEvents('old', [{ kind: 'status', status: 'running' }, ...parts]), 4);
      assert.equal(await store.appendEvents('old', [{ kind: 'retract', step: 'a/s', attempt: 2 }]), 8);
      const after = [...before, [4, 'status', 'running'], [5, 'part', '"a"'], [6, 'part', '"b"'], [7, 'part', '"c"'], [8, 'retract', 2]];
      for (let from = 0; from <= 9; from++) {
        assert.deepEqual(brief(await store.readEvents('old', from, 100)), after.slice(from), `from ${from}`);
        assert.deepEqual(brief(await store.readEvents('old', from, 2)), after.slice(from, from + 2), `from ${from}, 2 at most`);
      }
      assert.equal(await store.streamLength('old'), 9);
      assert.equal(await admin.xlen(key), 6, 'four old entries, then one entry per append');
      // A waiter for an offset inside the last batch is satisfied at once; one past the end is not.
      assert.equal(await store.waitForEvents('old', 8, AbortSignal.timeout(5_000)), true);
      assert.equal(await store.waitForEvents('old', 9, AbortSignal.timeout(50)), false);
      assert.equal(await store.dropStream('old'), 9);
      assert.equal(await store.streamLength('old'), 0);
    } finally {
      admin.disconnect();
      await store.close();
      await deleteKeysUnder(prefix);
    }
  });
});
