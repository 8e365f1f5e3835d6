import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { createHash, randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import { Client, type Notification } from 'pg';
import { Redis } from 'ioredis';
import type { CheckpointStore, StoredStreamEvent } from '../../src/contract/checkpoint-store';
import { RedisCheckpointStore } from '../../src/storage/redis/redis-store';
import { pgStreamChannel } from '../../src/storage/sql/sql-stream';
import { tableNames } from '../../src/storage/sql/sql';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { killLiveChildren, lastJsonLine, spawnNode, waitForLine } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { leasedRun } from '../helpers/store-records';

// Run output streams across processes (issue 37): a reader blocked in waitForEvents in a CHILD process
// is woken by an append made in this one, through the database alone (PostgreSQL LISTEN/NOTIFY, Redis
// XREAD BLOCK). Nothing is timed: a generous timeout only bounds a hang.
const WAITER = resolve(__dirname, '../helpers/stream-waiter-child.js');
const REDIS_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await killLiveChildren();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
after(killLiveChildren);

interface Backend {
  name: 'postgres' | 'redis';
  /** A fresh store and the location argument the child opens the same data with. */
  open(testName: string): Promise<{ store: CheckpointStore; location: string }>;
}

const BACKENDS: Backend[] = [
  {
    name: 'postgres',
    open: async (testName) => {
      const schema = schemaFor(`stream cross-process: ${testName}`);
      await dropSchema(schema);
      const store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 4 });
      cleanups.push(async () => (await store.close(), await dropSchema(schema)));
      await store.init();
      return { store, location: schema };
    },
  },
  {
    name: 'redis',
    open: async (testName) => {
      const prefix = `wp-test:${createHash('sha256').update(testName).digest('hex').slice(0, 10)}-${randomUUID().slice(0, 8)}:`;
      const store = new RedisCheckpointStore({ url: REDIS_URL, keyPrefix: prefix });
      cleanups.push(async () => {
        await store.close();
        const admin = new Redis(REDIS_URL);
        const keys: string[] = [];
        for await (const batch of admin.scanStream({ match: `${prefix}*`, count: 500 })) keys.push(...(batch as string[]));
        if (keys.length > 0) await admin.del(...keys);
        admin.disconnect();
      });
      await store.init();
      return { store, location: prefix };
    },
  },
];

for (const backend of BACKENDS) {
  describe(`${backend.name}: run stream waiters in another process`, () => {
    it('a reader blocked in a child process is woken by an append from this process, and reads it', async () => {
      const { store, location } = await backend.open('child wake');
      const epoch = await leasedRun(store, 'r1');
      await store.appendEvents!('r1', [{ kind: 'status', status: 'running' }], { epoch });
      const child = spawnNode(WAITER, [backend.name, location, 'r1', '1']);
      await waitForLine(child, /^waiting$/);
      await new Promise((r) => setTimeout(r, 300)); // let it block (a wake-up before that is still correct)
      await store.appendEvents!('r1', [{ kind: 'part', step: 'a/s', attempt: 1, data: '"from the parent"' }], { epoch });
      const exit = await child.exited;
      assert.equal(exit.code, 0, exit.stderr);
      const out = lastJsonLine<{ woke: boolean; events: StoredStreamEvent[] }>(exit);
      assert.equal(out.woke, true);
      assert.deepEqual(
        out.events.map((e) => [e.offset, e.kind, e.kind === 'part' ? e.data : null]),
        [[1, 'part', '"from the parent"']],
      );
    });

    it('several children waiting on one run are all woken by one append', async () => {
      const { store, location } = await backend.open('children wake');
      const epoch = await leasedRun(store, 'r1');
      const children = [0, 1, 2].map(() => spawnNode(WAITER, [backend.name, location, 'r1', '0']));
      for (const child of children) await waitForLine(child, /^waiting$/);
      await new Promise((r) => setTimeout(r, 300));
      await store.appendEvents!('r1', [{ kind: 'retract', step: 'a/s', attempt: 1 }], { epoch });
      for (const child of children) {
        const exit = await child.exited;
        assert.equal(exit.code, 0, exit.stderr);
        assert.equal(lastJsonLine<{ woke: boolean }>(exit).woke, true);
      }
    });
  });
}

describe('postgres: one listening connection per store', () => {
  it('many waiters on many runs share the store its one LISTEN connection', async () => {
    const { store, location } = await BACKENDS[0].open('one listener');
    const channel = pgStreamChannel(tableNames({ schema: location, prefix: 'waypoint_' }));
    const epochs = await Promise.all(['a', 'b', 'c'].map((id) => leasedRun(store, id)));
    const controller = new AbortController();
    const waits = ['a', 'a', 'b', 'c', 'c'].map((id) => store.waitForEvents!(id, 0, controller.signal));
    await new Promise((r) => setTimeout(r, 300));
    const admin = new Client({ connectionString: PG_TEST_URL });
    await admin.connect();
    try {
      const { rows } = await admin.query<{ n: string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'waypoint-stream-listener' AND query = $1`, [
        `LISTEN "${channel}"`,
      ]);
      assert.equal(Number(rows[0].n), 1, 'five waiters, one listening session');
    } finally {
      await admin.end();
    }
    // The append notifies the channel with the run id (what wakes the waiters without waiting for the re-check).
    const listener = new Client({ connectionString: PG_TEST_URL });
    await listener.connect();
    try {
      await listener.query(`LISTEN "${channel}"`);
      const notified = new Promise<string | undefined>((resolve) => listener.once('notification', (m: Notification) => resolve(m.payload)));
      await store.appendEvents!('b', [{ kind: 'status', status: 'running' }], { epoch: epochs[1] });
      assert.equal(await notified, 'b');
    } finally {
      await listener.end();
    }
    assert.equal(await waits[2], true);
    controller.abort();
    assert.deepEqual(await Promise.all([waits[0], waits[1], waits[3], waits[4]]), [false, false, false, false]);
  });
});

describe('postgres: a lost listening connection costs a re-check, never a hang', () => {
  it('after the LISTEN session is killed, a waiter is still woken by the next append, and a new wait listens again', async () => {
    const { store, location } = await BACKENDS[0].open('listener lost');
    const channel = pgStreamChannel(tableNames({ schema: location, prefix: 'waypoint_' }));
    const epoch = await leasedRun(store, 'r1');
    const signal = AbortSignal.timeout(15_000);
    const waiting = store.waitForEvents!('r1', 0, signal);
    await new Promise((r) => setTimeout(r, 300));
    const admin = new Client({ connectionString: PG_TEST_URL });
    await admin.connect();
    const listeners = async () =>
      Number(
        (await admin.query<{ n: string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = 'waypoint-stream-listener' AND query = $1`, [`LISTEN "${channel}"`]))
          .rows[0].n,
      );
    try {
      const killed = await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'waypoint-stream-listener' AND query = $1`, [
        `LISTEN "${channel}"`,
      ]);
      assert.equal(killed.rowCount, 1, 'the store had one listening session');
      await store.appendEvents!('r1', [{ kind: 'status', status: 'running' }], { epoch });
      assert.equal(await waiting, true, 'woken although its notification had no listener');
      assert.equal(await store.waitForEvents!('r1', 0, signal), true);
      const next = store.waitForEvents!('r1', 1, signal);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(await listeners(), 1, 'the next wait opened a new listening session');
      await store.appendEvents!('r1', [{ kind: 'status', status: 'paused' }], { epoch });
      assert.equal(await next, true);
    } finally {
      await admin.end();
    }
  });
});
