import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { after, afterEach, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { StepAppend, StepRecord } from '../../src/contract/checkpoint-store';
import { redisKeys } from '../../src/storage/redis/keys';
import { RedisCheckpointStore, type RedisStoreOptions } from '../../src/storage/redis/redis-store';
import { cursorAt, newRun, stepRecord, withCode } from '../helpers/store-records';

// RedisCheckpointStore.appendRun: the rows of an 'async' run in flight in one script call
// (waypointAppendSteps). Each test has its own key prefix on the shared server, deleted afterwards.
const URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const admin = new Redis(URL);
after(() => admin.disconnect());

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function freshStore(options: RedisStoreOptions = {}): Promise<{ store: RedisCheckpointStore; prefix: string }> {
  const prefix = `wp-test:append-run:${randomUUID()}:`;
  const store = new RedisCheckpointStore({ url: URL, keyPrefix: prefix, ...options });
  await store.init();
  cleanups.push(async () => {
    await store.close();
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(...keys);
  });
  return { store, prefix };
}

function batch(runId: string, sequences: number[], epoch: number): StepAppend[] {
  return sequences.map((sequence) => ({ step: stepRecord(runId, sequence), run: cursorAt(sequence), fence: { epoch } }));
}

/** A client of the test's own that counts the scripts it sends (EVALSHA, or EVAL after a NOSCRIPT). */
function countingClient(): { client: Redis; scripts: () => number } {
  const client = new Redis(URL);
  cleanups.push(async () => void (await client.quit()));
  let scripts = 0;
  const send = client.sendCommand.bind(client);
  client.sendCommand = (command, stream) => {
    if (command.name === 'evalsha' || command.name === 'eval') scripts++;
    return send(command, stream);
  };
  return { client, scripts: () => scripts };
}

describe('RedisCheckpointStore.appendRun: one fenced script call for a batch', () => {
  it('a stale executor (its lease taken over) writes none of the batch', async () => {
    const { store, prefix } = await freshStore();
    await store.createRun(newRun('r1'));
    const stale = (await store.acquireLease('r1', 'A', 30_000))!;
    await store.appendRun(batch('r1', [1, 2], stale.epoch));
    const taken = (await store.acquireLease('r1', 'B', 30_000, 'A'))!;
    assert.equal(taken.epoch, stale.epoch + 1);
    const before = await store.loadRun('r1');

    await assert.rejects(store.appendRun(batch('r1', [3, 4, 5], stale.epoch)), (error: unknown) => {
      withCode('LEASE_LOST')(error);
      assert.match((error as Error).message, /r1/);
      return true;
    });
    assert.equal(await admin.hlen(redisKeys(prefix).steps('r1')), 2, 'no row of the stale batch in the steps hash');
    assert.deepStrictEqual(await store.loadRun('r1'), before, 'run hash and rows unchanged');

    await store.appendRun(batch('r1', [3, 4, 5], taken.epoch)); // the new holder goes on at the same sequences
    assert.deepEqual(
      (await store.loadRun('r1'))!.steps.map((s) => s.sequence),
      [1, 2, 3, 4, 5],
    );
  });

  it('a gap anywhere in the batch, or a batch that does not follow the last row, writes nothing', async () => {
    const { store } = await freshStore();
    await store.createRun(newRun('r1'));
    const { epoch } = (await store.acquireLease('r1', 'A', 30_000))!;
    await store.appendRun(batch('r1', [1, 2], epoch));
    const before = await store.loadRun('r1');
    await assert.rejects(store.appendRun(batch('r1', [3, 4, 6], epoch)), withCode('LEASE_LOST'));
    await assert.rejects(store.appendRun(batch('r1', [4, 5, 6], epoch)), withCode('LEASE_LOST'));
    await assert.rejects(store.appendRun(batch('r1', [2, 3], epoch)), withCode('LEASE_LOST'), 'a row already written');
    assert.deepStrictEqual(await store.loadRun('r1'), before);
  });

  it('450 rows (past the script HSET chunk) land in order in one call, with the last cursor and status', async () => {
    const counted = countingClient();
    const { store } = await freshStore({ client: counted.client });
    await store.createRun(newRun('r1'));
    const { epoch } = (await store.acquireLease('r1', 'A', 30_000))!;
    const appends = batch(
      'r1',
      Array.from({ length: 450 }, (_, i) => i + 1),
      epoch,
    );
    appends[449] = { ...appends[449], run: cursorAt(450, { status: 'completed', resumeHint: 'done' }) };
    const calls = counted.scripts();
    await store.appendRun(appends);
    assert.equal(counted.scripts() - calls, 1, 'one script call for the whole batch');
    const loaded = (await store.loadRun('r1'))!;
    assert.deepStrictEqual(
      loaded.steps,
      appends.map((a): StepRecord => a.step),
    );
    assert.deepEqual([loaded.run.lastSequence, loaded.run.cursorStep, loaded.run.status, loaded.run.resumeHint], [450, 450, 'completed', 'done']);
    assert.deepEqual(
      (await store.listRuns({ status: 'completed' })).map((r) => r.runId),
      ['r1'],
      'status index moved once',
    );
    assert.deepEqual(
      (await store.listRuns({ status: 'running' })).map((r) => r.runId),
      [],
    );
  });

  it('with a journal: an accepted batch is one notice beside its rows, a fenced one writes no row', async () => {
    const journal = `wp-test:append-run:journal:${randomUUID()}`;
    cleanups.push(async () => void (await admin.del(journal)));
    const { store, prefix } = await freshStore({ journal });
    await store.createRun(newRun('r1'));
    const { epoch } = (await store.acquireLease('r1', 'A', 30_000))!;
    const notices = await admin.xlen(journal);
    await store.appendRun(batch('r1', [1, 2, 3], epoch));
    assert.equal((await admin.xlen(journal)) - notices, 1, 'one notice for the batch');
    const [[, fields]] = (await admin.xrevrange(journal, '+', '-', 'COUNT', 1)) as [string, string[]][];
    assert.deepEqual(fields, ['r', 'r1', 'k', 'u']);
    await assert.rejects(store.appendRun(batch('r1', [4, 5], epoch + 1)), withCode('LEASE_LOST'));
    assert.equal(await admin.hlen(redisKeys(prefix).steps('r1')), 3);
    assert.equal((await store.getRun('r1'))!.lastSequence, 3);
  });
});
