import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedisCheckpointStore } from '../../src/storage/redis/redis-store';
import { deleteKeysUnder, REDIS_TEST_URL } from '../lease/backends';
import { leasedRun } from '../helpers/store-records';

// The Redis store's stream waiters keep a woken waiter's blocking connection for the next wait (a reader
// waits again at once after each wake-up; opening a connection was most of its latency), and close the
// kept ones with the client.

const prefix = `wpt-stream-waiters:${randomUUID().slice(0, 8)}:`;
after(() => deleteKeysUnder(prefix));

describe('redis: stream waiter connections', () => {
  it('a reader woken five times opens one blocking connection; closing the client closes it', async () => {
    const client = new Redis(REDIS_TEST_URL);
    const opened: Redis[] = [];
    const duplicate = client.duplicate.bind(client);
    client.duplicate = (...args: Parameters<Redis['duplicate']>) => {
      const conn = duplicate(...args);
      opened.push(conn);
      return conn;
    };
    const store = new RedisCheckpointStore({ client, keyPrefix: prefix });
    await store.init();
    const epoch = await leasedRun(store, 'r1');
    for (let offset = 0; offset < 5; offset++) {
      const woken = store.waitForEvents('r1', offset, AbortSignal.timeout(20_000));
      while (opened.length === 0 || opened.at(-1)!.status !== 'ready') await new Promise((r) => setTimeout(r, 5));
      await store.appendEvents('r1', [{ kind: 'status', status: 'running' }], { epoch });
      assert.equal(await woken, true);
    }
    assert.equal(opened.length, 1, 'one connection served every wait');
    const aborted = new AbortController();
    const waiting = store.waitForEvents('r1', 5, aborted.signal);
    while (opened[0].status !== 'ready') await new Promise((r) => setTimeout(r, 5));
    aborted.abort();
    assert.equal(await waiting, false);
    assert.equal(opened.length, 1);
    const next = store.waitForEvents('r1', 4, AbortSignal.timeout(20_000));
    assert.equal(await next, true, 'a wait already satisfied opens nothing');
    // An aborted wait closes its connection (it was blocked in XREAD): the next blocking wait opens another.
    const again = store.waitForEvents('r1', 5, AbortSignal.timeout(20_000));
    while (opened.length < 2 || opened[1].status !== 'ready') await new Promise((r) => setTimeout(r, 5));
    await store.appendEvents('r1', [{ kind: 'status', status: 'running' }], { epoch });
    assert.equal(await again, true);
    await client.quit();
    const statusOf = (conn: Redis): string => conn.status;
    while (statusOf(opened[1]) !== 'end') await new Promise((r) => setTimeout(r, 5));
    assert.equal(statusOf(opened[0]), 'end');
  });
});
