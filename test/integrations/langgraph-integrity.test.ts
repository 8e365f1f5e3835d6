/**
 * Integrity, encryption and failure behaviour of the WaypointCheckpointSaver on SQLite, PostgreSQL and
 * Redis: a tampered record is a typed error naming where it is, never a silent fresh start; encrypted
 * payloads hold no clear text at rest; bad configs and unreachable stores fail with stable codes.
 */
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { LangGraphCheckpointCorruptedError, WaypointCheckpointSaver } from '../../src/integrations/langgraph';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { CheckpointCorruptedError, EncryptingCheckpointStore, type Telemetry } from '../../src/index';
import { BACKENDS, cfg, checkpoint, code, collect, meta, saverFixture } from './langgraph-harness';

const SECRET = 'TOP-SECRET-7f3a9c';
const k1 = randomBytes(32);
const k2 = randomBytes(32);

for (const backend of BACKENDS) {
  describe(`WaypointCheckpointSaver integrity on ${backend}`, () => {
    it('a tampered checkpoint, channel value or pending write is CHECKPOINT_CORRUPTED naming thread and checkpoint', async () => {
      const f = await saverFixture(backend, `integrity ${backend} tamper`);
      try {
        const { saver, raw } = f;
        await saver.put(cfg('t'), checkpoint('c1', { a: 'alpha' }, { a: 1 }), meta(0), { a: 1 });
        await saver.put(cfg('t', 'c1'), checkpoint('c2', { a: 'alpha', b: 'beta' }, { a: 1, b: 1 }), meta(1), { b: 1 });
        await saver.putWrites(cfg('t', 'c2'), [['a', 'pending']], 'task-1');

        await raw.tamperWrites('t', '', 'c2');
        await assert.rejects(saver.getTuple(cfg('t', 'c2')), code('CHECKPOINT_CORRUPTED', "thread 't'", "checkpoint 'c2'", 'pending write task-1#0'));
        await raw.tamperCheckpoint('t', '', 'c1');
        const err = await saver.getTuple(cfg('t', 'c1')).catch((e: unknown) => e);
        assert.ok(err instanceof LangGraphCheckpointCorruptedError && err instanceof CheckpointCorruptedError);
        assert.deepEqual([err.threadId, err.checkpointNs, err.checkpointId], ['t', '', 'c1']);
        assert.match(err.message, /SHA-256 does not match/);
        await assert.rejects(collect(saver.list(cfg('t'))), code('CHECKPOINT_CORRUPTED'), 'listing does not skip it silently');
        await raw.tamperBlobs('t');
        await assert.rejects(saver.getTuple(cfg('t', 'c2')), code('CHECKPOINT_CORRUPTED', "value of channel 'a'"));
        // A checkpoint whose values were deleted is refused too, and a child cannot inherit them.
        await raw.deleteBlobs('t');
        await assert.rejects(saver.getTuple(cfg('t', 'c2')), code('CHECKPOINT_CORRUPTED', 'is missing'));
        await assert.rejects(
          saver.put(cfg('t', 'c2'), checkpoint('c3', { a: 'alpha', b: 'beta' }, { a: 1, b: 1 }), meta(2), {}),
          code('CHECKPOINT_CORRUPTED', 'parent checkpoint', 'missing'),
        );
        assert.equal((await raw.counts('t')).checkpoints, 2, 'c3 was not written');
      } finally {
        await f.close();
      }
    });

    it('encrypts checkpoints, metadata, values and writes at rest; rotates keys; refuses without the key', async () => {
      const encryption = { activeKeyId: 'k1', keys: { k1 } };
      const f = await saverFixture(backend, `integrity ${backend} encryption`, { encryption });
      try {
        const { saver, raw } = f;
        await saver.put(cfg('t'), checkpoint('c1', { note: SECRET }, { note: 1 }), meta(0, { who: SECRET }), { note: 1 });
        await saver.putWrites(cfg('t', 'c1'), [['note', `${SECRET} pending`]], 'task');
        const stored = await raw.payloads('t');
        assert.equal(stored.length, 4);
        for (const bytes of [...stored, raw.fileBytes()]) assert.ok(!bytes.includes(SECRET), 'clear text at rest');
        const tuple = await saver.getTuple(cfg('t'));
        assert.deepEqual(tuple?.checkpoint.channel_values, { note: SECRET });
        assert.equal((tuple?.metadata as Record<string, unknown>).who, SECRET);
        assert.deepEqual(tuple?.pendingWrites, [['task', 'note', `${SECRET} pending`]]);
        const filtered = await collect(saver.list(cfg('t'), { filter: { who: SECRET } }));
        assert.equal(filtered.length, 1, 'metadata filters work on encrypted rows');

        const rotated = f.another({ encryption: { activeKeyId: 'k2', keys: { k1, k2 } } });
        assert.deepEqual((await rotated.getTuple(cfg('t')))?.checkpoint.channel_values, { note: SECRET });
        await rotated.put(cfg('t', 'c1'), checkpoint('c2', { note: SECRET, more: 1 }, { note: 1, more: 1 }), meta(1), { more: 1 });
        await assert.rejects(saver.getTuple(cfg('t', 'c2')), code('CHECKPOINT_CORRUPTED', "key id 'k2'"));
        await assert.rejects(f.another().getTuple(cfg('t')), code('CHECKPOINT_CORRUPTED', "no 'encryption' keys"));
        const wrongKey = f.another({ encryption: { activeKeyId: 'k1', keys: { k1: k2 } } });
        await assert.rejects(wrongKey.getTuple(cfg('t', 'c1')), code('CHECKPOINT_CORRUPTED', 'decryption'));
      } finally {
        await f.close();
      }
    });

    it('stores clear text without encryption (the control for the test above)', async () => {
      const f = await saverFixture(backend, `integrity ${backend} clear`);
      try {
        await f.saver.put(cfg('t'), checkpoint('c1', { note: SECRET }, { note: 1 }), meta(0), { note: 1 });
        assert.ok((await f.raw.payloads('t')).some((b) => b.includes(SECRET)));
      } finally {
        await f.close();
      }
    });

    it('refuses configs without what an operation needs, and identifiers with NUL', async () => {
      const f = await saverFixture(backend, `integrity ${backend} config`);
      try {
        const { saver } = f;
        await assert.rejects(saver.put({}, checkpoint('c1', {}, {}), meta(0), {}), code('LANGGRAPH_INVALID_CONFIG', 'configurable'));
        await assert.rejects(saver.put({ configurable: {} }, checkpoint('c1', {}, {}), meta(0), {}), code('LANGGRAPH_INVALID_CONFIG', 'thread_id'));
        await assert.rejects(saver.put(cfg('a\u0000b'), checkpoint('c1', {}, {}), meta(0), {}), code('LANGGRAPH_INVALID_CONFIG', 'NUL'));
        await assert.rejects(saver.putWrites(cfg('t'), [['a', 1]], 'task'), code('LANGGRAPH_INVALID_CONFIG', 'checkpoint_id'));
        await assert.rejects(saver.putWrites({ configurable: { thread_id: { id: 1 }, checkpoint_id: 'c' } }, [], 'task'), code('LANGGRAPH_INVALID_CONFIG', 'must be a string'));
        assert.equal(await saver.getTuple({ configurable: {} }), undefined);
        // A numeric thread id is stored as its string.
        await saver.put({ configurable: { thread_id: 42 } }, checkpoint('c1', { v: 1 }, { v: 1 }), meta(0), { v: 1 });
        assert.deepEqual((await saver.getTuple(cfg('42')))?.checkpoint.channel_values, { v: 1 });
      } finally {
        await f.close();
      }
    });

    it('reports each operation as a telemetry span', async () => {
      const spans: string[] = [];
      const telemetry = { span: (name: string, _attributes: unknown, fn: () => Promise<unknown>) => (spans.push(name), fn()) } as unknown as Telemetry;
      const f = await saverFixture(backend, `integrity ${backend} telemetry`, { telemetry });
      try {
        await f.saver.put(cfg('t'), checkpoint('c1', {}, {}), meta(0), {});
        await f.saver.putWrites(cfg('t', 'c1'), [['a', 1]], 'task');
        await f.saver.getTuple(cfg('t'));
        assert.deepEqual(spans, ['waypoint.langgraph.put', 'waypoint.langgraph.put_writes', 'waypoint.langgraph.get_tuple']);
      } finally {
        await f.close();
      }
    });
  });
}

describe('WaypointCheckpointSaver: store failures and options', () => {
  it('an unreachable Redis is STORE_UNAVAILABLE, promptly', async () => {
    const saver = new WaypointCheckpointSaver({ redis: { url: 'redis://127.0.0.1:1', keyPrefix: 'wpt:none:' } });
    try {
      const started = Date.now();
      await assert.rejects(saver.getTuple(cfg('t')), code('STORE_UNAVAILABLE', 'redis', "thread 't'"));
      assert.ok(Date.now() - started < 5_000);
    } finally {
      await saver.close();
    }
  });

  it('an unreachable PostgreSQL is STORE_UNAVAILABLE', async () => {
    const store = new TypeOrmCheckpointStore({ type: 'postgres', url: 'postgres://postgres@127.0.0.1:1/test' });
    const saver = new WaypointCheckpointSaver({ store });
    await assert.rejects(saver.put(cfg('t'), checkpoint('c1', {}, {}), meta(0), {}), code('STORE_UNAVAILABLE'));
    await store.close();
  });

  it('needs exactly one storage and sane retention', () => {
    assert.throws(() => new WaypointCheckpointSaver({}), code('INVALID_OPTIONS'));
    const store = new TypeOrmCheckpointStore({ type: 'sqlite', path: '/nonexistent/never-opened.db' });
    assert.throws(() => new WaypointCheckpointSaver({ store, redis: {} }), code('INVALID_OPTIONS'));
    const wrapped = new EncryptingCheckpointStore(store, { activeKeyId: 'k', keys: { k: k1 } });
    assert.throws(() => new WaypointCheckpointSaver({ store: wrapped as never }), code('INVALID_OPTIONS', 'TypeOrmCheckpointStore'));
    assert.throws(() => new WaypointCheckpointSaver({ store, retention: { keepLast: 0 } }), code('INVALID_OPTIONS', 'keepLast'));
    assert.throws(() => new WaypointCheckpointSaver({ store, retention: { keepLast: 3, pruneEvery: 0.5 } }), code('INVALID_OPTIONS', 'pruneEvery'));
    assert.throws(() => new WaypointCheckpointSaver({ store, encryption: { activeKeyId: 'k', keys: { k: Buffer.alloc(8) } } }), code('INVALID_KEY'));
  });
});
