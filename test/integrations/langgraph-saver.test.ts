/**
 * WaypointCheckpointSaver behaviour beyond LangGraph's conformance suite, on SQLite, PostgreSQL and Redis:
 * content-addressed channel values (unchanged channels never rewritten, forks never colliding), retention,
 * pending-write semantics, listing, threads. Each test on storage of its own.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ERROR, INTERRUPT } from '@langchain/langgraph-checkpoint';
import { BACKENDS, type Backend, type SaverFixture, cfg, checkpoint, code, collect, ids, meta, saverFixture } from './langgraph-harness';

async function withSaver(backend: Backend, name: string, fn: (f: SaverFixture) => Promise<void>, options = {}): Promise<void> {
  const f = await saverFixture(backend, `saver ${backend} ${name}`, options);
  try {
    await fn(f);
  } finally {
    await f.close();
  }
}

const big = 'x'.repeat(10_000);

for (const backend of BACKENDS) {
  describe(`WaypointCheckpointSaver on ${backend}`, () => {
    it('writes only changed channels; unchanged ones are carried by reference and equal values share one blob', () =>
      withSaver(backend, 'content addressing', async ({ saver, raw }) => {
        const [c1, c2, c3] = ids('c', 3);
        await saver.put(cfg('t'), checkpoint(c1, { a: big, b: 1 }, { a: 1, b: 1 }), meta(0), { a: 1, b: 1 });
        await saver.put(cfg('t', c1), checkpoint(c2, { a: big, b: 2 }, { a: 1, b: 2 }), meta(1), { b: 2 });
        assert.deepEqual(await raw.counts('t'), { checkpoints: 2, blobs: 3, writes: 0 }, 'a was not rewritten');
        // c has the same value as a: same address, no new blob.
        await saver.put(cfg('t', c2), checkpoint(c3, { a: big, b: 2, c: big }, { a: 1, b: 2, c: 1 }), meta(2), { c: 1 });
        assert.deepEqual(await raw.counts('t'), { checkpoints: 3, blobs: 3, writes: 0 });
        const bytes = (await raw.payloads('t')).reduce((n, b) => n + b.length, 0);
        assert.ok(bytes < 2 * big.length, `the 10 kB value is stored once (${bytes} bytes in all)`);
        assert.deepEqual((await saver.getTuple(cfg('t', c3)))?.checkpoint.channel_values, { a: big, b: 2, c: big });
        assert.deepEqual((await saver.getTuple(cfg('t', c1)))?.checkpoint.channel_values, { a: big, b: 1 });
        assert.deepEqual((await saver.getTuple(cfg('t')))?.checkpoint.id, c3, 'latest');
      }));

    it('two forks of one checkpoint at the same channel version keep their own values', () =>
      withSaver(backend, 'forks', async ({ saver }) => {
        const [root, x, y, x2] = ids('f', 4);
        await saver.put(cfg('t'), checkpoint(root, { msgs: ['hi'], n: 0 }, { msgs: 1, n: 1 }), meta(0), { msgs: 1, n: 1 });
        // Both branches reach version 2 of 'msgs' with different content: a saver keyed by
        // (channel, version) would serve one branch the other's messages.
        await saver.put(cfg('t', root), checkpoint(x, { msgs: ['hi', 'from x'], n: 0 }, { msgs: 2, n: 1 }), meta(1), { msgs: 2 });
        await saver.put(cfg('t', root), checkpoint(y, { msgs: ['hi', 'from y'], n: 0 }, { msgs: 2, n: 1 }), meta(1), { msgs: 2 });
        await saver.put(cfg('t', x), checkpoint(x2, { msgs: ['hi', 'from x'], n: 5 }, { msgs: 2, n: 2 }), meta(2), { n: 2 });
        assert.deepEqual((await saver.getTuple(cfg('t', x)))?.checkpoint.channel_values, { msgs: ['hi', 'from x'], n: 0 });
        assert.deepEqual((await saver.getTuple(cfg('t', y)))?.checkpoint.channel_values, { msgs: ['hi', 'from y'], n: 0 });
        assert.deepEqual((await saver.getTuple(cfg('t', x2)))?.checkpoint.channel_values, { msgs: ['hi', 'from x'], n: 5 });
        assert.equal((await saver.getTuple(cfg('t', y)))?.parentConfig?.configurable?.checkpoint_id, root);
      }));

    it('a channel updated to empty is absent; a carried channel the parent holds at another version is not invented', () =>
      withSaver(backend, 'empty channels', async ({ saver }) => {
        const [c1, c2] = ids('e', 2);
        await saver.put(cfg('t'), checkpoint(c1, { a: 1, b: 1 }, { a: 1, b: 1 }), meta(0), { a: 1, b: 1 });
        await saver.put(cfg('t', c1), checkpoint(c2, { b: 1, c: 3 }, { a: 2, b: 7, c: 1 }), meta(1), { a: 2, c: 1 });
        assert.deepEqual((await saver.getTuple(cfg('t', c2)))?.checkpoint.channel_values, { c: 3 });
      }));

    it('refuses to write on top of a parent that no longer exists when channels must be carried', () =>
      withSaver(backend, 'parent missing', async ({ saver, raw }) => {
        await assert.rejects(saver.put(cfg('t', 'gone'), checkpoint('c1', { a: 1, b: 2 }, { a: 1, b: 1 }), meta(1), { b: 1 }), code('LANGGRAPH_PARENT_MISSING', "'gone'", 'a'));
        assert.deepEqual(await raw.counts('t'), { checkpoints: 0, blobs: 0, writes: 0 }, 'nothing written');
        // Nothing to carry: the missing parent does not matter.
        await saver.put(cfg('t', 'gone'), checkpoint('c1', { b: 2 }, { b: 1 }), meta(1), { b: 1 });
        assert.equal((await saver.getTuple(cfg('t')))?.parentConfig?.configurable?.checkpoint_id, 'gone');
      }));

    it('retention keeps the newest checkpoints per namespace with their writes and every value they reference', () =>
      withSaver(
        backend,
        'retention',
        async ({ saver, raw }) => {
          const chain = ids('r', 6);
          let parent: string | undefined;
          for (const [i, id] of chain.entries()) {
            const values = { a: 'only written once', b: i };
            await saver.put(cfg('t', parent), checkpoint(id, values, { a: 1, b: i + 1 }), meta(i), i === 0 ? { a: 1, b: 1 } : { b: i + 1 });
            await saver.putWrites(cfg('t', id), [['b', i + 100]], `task-${i}`);
            parent = id;
          }
          assert.deepEqual(await raw.counts('t'), { checkpoints: 2, blobs: 3, writes: 2 });
          assert.deepEqual(
            (await collect(saver.list(cfg('t')))).map((x) => x.checkpoint.id),
            [chain[5], chain[4]],
          );
          const latest = await saver.getTuple(cfg('t'));
          assert.deepEqual(latest?.checkpoint.channel_values, { a: 'only written once', b: 5 }, 'a value written by a pruned checkpoint is kept');
          assert.deepEqual(latest?.pendingWrites, [['task-5', 'b', 105]]);
        },
        { retention: { keepLast: 2, pruneEvery: 1 } },
      ));

    it('prune counts what it removed and keeps the newest of each namespace', () =>
      withSaver(backend, 'prune namespaces', async ({ saver, raw }) => {
        for (const ns of ['', 'child:1']) {
          let parent: string | undefined;
          for (const [i, id] of ids(`p${ns ? 'c' : 'r'}`, 3).entries()) {
            await saver.put(cfg('t', parent, ns), checkpoint(id, { v: `${ns}${i}` }, { v: i + 1 }), meta(i), { v: i + 1 });
            await saver.putWrites(cfg('t', id, ns), [['v', i]], 'task');
            parent = id;
          }
        }
        assert.deepEqual(await saver.prune('t', { keepLast: 1 }), { checkpoints: 4, writes: 4, blobs: 4 });
        assert.deepEqual(await raw.counts('t'), { checkpoints: 2, blobs: 2, writes: 2 });
        assert.deepEqual((await saver.getTuple(cfg('t', undefined, 'child:1')))?.checkpoint.channel_values, { v: 'child:12' });
        assert.deepEqual(await saver.prune('missing-thread', { keepLast: 1 }), { checkpoints: 0, writes: 0, blobs: 0 });
        await assert.rejects(saver.prune('t', { keepLast: 0 }), code('INVALID_OPTIONS'));
      }));

    it('puts and prunes racing on one thread leave every remaining checkpoint loadable', () =>
      withSaver(backend, 'race', async ({ saver }) => {
        const chain = ids('z', 25);
        let done = false;
        const pruner = (async () => {
          while (!done) {
            await saver.prune('t', { keepLast: 1 });
            await new Promise((r) => setImmediate(r));
          }
        })();
        try {
          let parent: string | undefined;
          for (const [i, id] of chain.entries()) {
            await saver.put(cfg('t', parent), checkpoint(id, { big, i }, { big: 1, i: i + 1 }), meta(i), i === 0 ? { big: 1, i: 1 } : { i: i + 1 });
            parent = id;
          }
        } finally {
          done = true;
          await pruner;
        }
        const left = await collect(saver.list(cfg('t')));
        assert.ok(left.length >= 1);
        assert.deepEqual(left[0]?.checkpoint.channel_values, { big, i: 24 });
      }));

    it('pending writes: a regular write keeps its first value, a special one is replaced; replay order is (path, task, idx)', () =>
      withSaver(backend, 'writes', async ({ saver }) => {
        await saver.put(cfg('t'), checkpoint('w1', {}, {}), meta(0), {});
        const at = cfg('t', 'w1');
        await saver.putWrites(
          at,
          [
            ['x', 'first'],
            ['y', 'second'],
          ],
          'task-b',
          'path-2',
        );
        await saver.putWrites(at, [['x', 'ignored']], 'task-b', 'path-2');
        await saver.putWrites(at, [[ERROR, { message: 'boom' }]], 'task-a', 'path-1');
        await saver.putWrites(at, [[ERROR, { message: 'boom again' }]], 'task-a', 'path-1');
        await saver.putWrites(
          at,
          [
            [INTERRUPT, 'ask'],
            ['z', 1],
          ],
          'task-a',
        );
        assert.deepEqual((await saver.getTuple(at))?.pendingWrites, [
          ['task-a', INTERRUPT, 'ask'],
          ['task-a', 'z', 1],
          ['task-a', ERROR, { message: 'boom again' }],
          ['task-b', 'x', 'first'],
          ['task-b', 'y', 'second'],
        ]);
      }));

    it('lists across pages newest first, with filter, limit, before, namespace and across threads', () =>
      withSaver(backend, 'list', async ({ saver }) => {
        const all = ids('l', 230);
        let parent: string | undefined;
        for (const [i, id] of all.entries()) {
          await saver.put(cfg('t1', parent), checkpoint(id, { i }, { i: i + 1 }), meta(i, { source: i % 3 === 0 ? 'input' : 'loop', tags: { n: i % 2 } }), { i: i + 1 });
          parent = id;
        }
        await saver.put(cfg('t2'), checkpoint('l-9999', { i: -1 }, { i: 1 }), meta(0, { source: 'input' }), { i: 1 });
        const every = await collect(saver.list(cfg('t1')));
        assert.deepEqual(
          every.map((x) => x.checkpoint.id),
          [...all].reverse(),
        );
        const inputs = await collect(saver.list(cfg('t1'), { filter: { source: 'input', tags: { n: 0 } }, limit: 30 }));
        assert.deepEqual(
          inputs.map((x) => x.checkpoint.id),
          [...all]
            .reverse()
            .filter((_, j) => (229 - j) % 6 === 0)
            .slice(0, 30),
        );
        const before = await collect(saver.list(cfg('t1'), { before: cfg('t1', all[100]), limit: 2 }));
        assert.deepEqual(
          before.map((x) => x.checkpoint.id),
          [all[99], all[98]],
        );
        const everywhere = await collect(saver.list({ configurable: {} }, { filter: { source: 'input' }, limit: 2 }));
        assert.deepEqual(
          everywhere.map((x) => [x.config.configurable?.thread_id as string, x.checkpoint.id]),
          [
            ['t2', 'l-9999'],
            ['t1', all[228]],
          ],
        );
        assert.deepEqual(await collect(saver.list(cfg('t1', undefined, 'other'))), []);
        assert.deepEqual(
          (await collect(saver.list({ configurable: { thread_id: 't1', checkpoint_id: all[5] } }))).map((x) => x.checkpoint.id),
          [all[5]],
        );
        assert.deepEqual(await collect(saver.list(cfg('t1'), { limit: 0 })), []);
      }));

    it('deleteThread removes one thread entirely; listThreads orders threads by their last checkpoint', () =>
      withSaver(backend, 'threads', async ({ saver, raw }) => {
        for (const t of ['old', 'keep']) {
          await saver.put(cfg(t), checkpoint('d1', { v: t }, { v: 1 }), meta(0), { v: 1 });
          await saver.putWrites(cfg(t, 'd1'), [['v', 1]], 'task');
          await new Promise((r) => setTimeout(r, 15));
        }
        const threads = await saver.listThreads();
        assert.deepEqual(
          threads.map((t) => t.threadId),
          ['old', 'keep'],
        );
        assert.deepEqual(
          (await saver.listThreads({ updatedBefore: threads[1].updatedAt })).map((t) => t.threadId),
          ['old'],
        );
        await saver.deleteThread('old');
        assert.deepEqual(await raw.counts('old'), { checkpoints: 0, blobs: 0, writes: 0 });
        assert.equal(await saver.getTuple(cfg('old')), undefined);
        assert.deepEqual((await saver.getTuple(cfg('keep')))?.checkpoint.channel_values, { v: 'keep' });
        assert.deepEqual(
          (await saver.listThreads()).map((t) => t.threadId),
          ['keep'],
        );
      }));
  });
}
