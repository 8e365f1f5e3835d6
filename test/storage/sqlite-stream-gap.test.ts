import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { SQLITE_STREAM_POLL_MS } from '../../src/storage/sql/sqlite-stream';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { StreamWaiters } from '../../src/storage/stream-waiters';
import { newRun } from '../helpers/store-records';
import { tempSqlitePath } from '../helpers/sqlite-temp';

/**
 * SQLite's append + wait path (issue 37): two store objects on one file stand for two processes (an
 * append in one does not notify the other's waiters). An append that commits between a reader's read of
 * the stream length and its sleep is not missed for good: the documented poll (`SQLITE_STREAM_POLL_MS`)
 * finds it. The waits here are bounded by a generous abort signal, never timed: a missed part makes the
 * wait end false (the test fails), not slow.
 */
describe("sqlite: an append between a reader's read and its wait", () => {
  const part = { kind: 'part' as const, step: 'a/s', attempt: 1, data: '"x"' };

  async function twoStores(run: (writer: TypeOrmCheckpointStore, reader: TypeOrmCheckpointStore) => Promise<void>): Promise<void> {
    const db = tempSqlitePath();
    const writer = new TypeOrmCheckpointStore({ type: 'sqlite', path: db.file });
    const reader = new TypeOrmCheckpointStore({ type: 'sqlite', path: db.file });
    try {
      await writer.init();
      await reader.init();
      await writer.createRun(newRun('gap'));
      await run(writer, reader);
    } finally {
      await reader.close();
      await writer.close();
      db.remove();
    }
  }

  it('the store wait: an append committed after the reader read its events wakes the wait at once', () =>
    twoStores(async (writer, reader) => {
      assert.deepEqual(await reader.readEvents('gap', 0, 100), []);
      await writer.appendEvents('gap', [part]);
      assert.equal(await reader.waitForEvents('gap', 0, AbortSignal.timeout(30_000)), true);
      assert.deepEqual(
        (await reader.readEvents('gap', 0, 100)).map((e) => e.offset),
        [0],
      );
    }));

  it('an append committed between the length read and the sleep is found by the next poll', () =>
    twoStores(async (writer, reader) => {
      const waiters = new StreamWaiters(SQLITE_STREAM_POLL_MS);
      let injected = false;
      // The reader's length read returns the stale 0, and only then the other "process" appends: the wait
      // has nothing to be notified by, only its poll.
      const staleThenAppend = async () => {
        const length = await reader.streamLength('gap');
        if (!injected) {
          injected = true;
          await writer.appendEvents('gap', [part]);
        }
        return length;
      };
      assert.equal(await waiters.wait('gap', 0, AbortSignal.timeout(30_000), staleThenAppend), true);
      assert.equal(await reader.streamLength('gap'), 1);
    }));

  it('the same race without the poll would miss the part for good (what the test above guards)', () =>
    twoStores(async (writer, reader) => {
      const waiters = new StreamWaiters(null);
      let injected = false;
      const staleThenAppend = async () => {
        const length = await reader.streamLength('gap');
        if (!injected) {
          injected = true;
          await writer.appendEvents('gap', [part]);
        }
        return length;
      };
      // AbortSignal.timeout's timer does not keep the process alive, and nothing else would here.
      const abort = new AbortController();
      const timer = setTimeout(() => abort.abort(), 1_000);
      try {
        assert.equal(await waiters.wait('gap', 0, abort.signal, staleThenAppend), false);
      } finally {
        clearTimeout(timer);
      }
    }));
});
