import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { after, afterEach, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { LoadedRun, StepRecord } from '../../src/contract/checkpoint-store';
import { journalFields } from '../../src/storage/redis/journal';
import { redisKeys } from '../../src/storage/redis/keys';
import { RedisCheckpointStore } from '../../src/storage/redis/redis-store';
import { resolveTieredOptions } from '../../src/storage/tiered/options';
import { HYDRATION_EPOCH_JUMP, judgeCopies, type CopyShape } from '../../src/storage/tiered/tier-link';
import { WriteBehindCheckpointStore } from '../../src/storage/tiered/write-behind-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { appendSteps, cursorAt, leasedRun, stepRecord, withCode } from '../helpers/store-records';
import { TcpProxy } from '../helpers/tcp-proxy';
import { MemoryLogger, REDIS_TEST_URL, deleteKeysUnder } from '../lease/backends';

// Write-behind's link between its tiers: which copy of a run is ahead, by sequence and by chain link, at
// load time and in the flusher. Each test has its own schema and key prefix on the shared servers; "Redis
// came back from an older snapshot" is made by replacing the run's Redis keys with an older copy of it.
const admin = new Redis(REDIS_TEST_URL);
after(() => admin.disconnect());
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(name: string, pgUrl = PG_TEST_URL) {
  const schema = schemaFor(`write-behind link: ${name}`);
  const prefix = `wp-test:wb-link:${randomUUID()}:`;
  await dropSchema(schema);
  const store = new WriteBehindCheckpointStore({
    redis: { url: REDIS_TEST_URL, keyPrefix: prefix },
    postgres: { url: pgUrl, schema, poolSize: 3 },
    writeBehind: { blockMs: 20 },
    logger: new MemoryLogger(),
  });
  await store.init();
  const pg = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 2 });
  await pg.init();
  // Redis as the store sees it, without the tiered store's checks.
  const raw = new RedisCheckpointStore({ url: REDIS_TEST_URL, keyPrefix: prefix, journal: `${prefix}journal` });
  await raw.init();
  cleanups.push(async () => {
    await store.close();
    await raw.close();
    await pg.close();
    await dropSchema(schema);
    await deleteKeysUnder(prefix);
  });
  return { store, pg, raw, prefix };
}

/** Puts an older copy of the run (its first `keep` steps) in Redis in place of the current one, as a restart from an older snapshot does. */
async function restoreOlderCopy(raw: RedisCheckpointStore, prefix: string, full: LoadedRun, keep: number, status: 'running' | 'paused' = 'running') {
  const keys = redisKeys(prefix);
  await admin.del(keys.run('r1'), keys.steps('r1'), keys.runOperations('r1'));
  const steps = full.steps.slice(0, keep);
  await raw.importRun({ run: { ...full.run, status, lastSequence: keep, cursorStep: keep }, steps }, [], 0);
}

const row = (sequence: number, checkpointId = `cp-${sequence}`) => ({ sequence, checkpointId });
const copy = (lastSequence: number, firstSequence: number | null, at: ReturnType<typeof row> | null): CopyShape => ({ lastSequence, firstSequence, row: at });

describe('tiered write-behind: which copy is ahead (judgeCopies)', () => {
  const cases: [string, CopyShape, CopyShape, string][] = [
    ['Redis extends PostgreSQL', copy(41, 1, row(40)), copy(40, 1, row(40)), 'redis-ahead'],
    ['equal copies', copy(40, 1, row(40)), copy(40, 1, row(40)), 'redis-ahead'],
    ['PostgreSQL extends Redis (older snapshot)', copy(15, 1, row(15)), copy(40, 1, row(15)), 'postgres-ahead'],
    ['Redis has no rows, PostgreSQL has', copy(0, null, null), copy(40, 1, null), 'postgres-ahead'],
    ['PostgreSQL has no rows', copy(3, 1, null), copy(0, null, null), 'redis-ahead'],
    ['Redis went on from an older copy', copy(50, 1, row(40, 'rerun-40')), copy(40, 1, row(40)), 'diverged'],
    ['Redis re-ran steps but is still shorter', copy(20, 1, row(20, 'rerun-20')), copy(40, 1, row(20)), 'diverged'],
    ['PostgreSQL folded its rows past Redis’s last', copy(15, 1, row(15)), copy(40, 30, null), 'postgres-ahead'],
    ['Redis lost rows in the middle of its copy', copy(41, 1, null), copy(40, 1, row(40)), 'diverged'],
  ];
  for (const [name, redis, postgres, verdict] of cases) {
    it(name, () => assert.equal(judgeCopies(redis, postgres).kind, verdict));
  }
  it('writeBehind.onDivergence must be a function', () =>
    assert.throws(
      () => resolveTieredOptions({ mode: 'write-behind', postgres: { url: PG_TEST_URL }, writeBehind: { onDivergence: 'page-me' as never } }),
      withCode('INVALID_OPTIONS'),
    ));
  it('a divergence names the sequence compared', () => assert.deepEqual(judgeCopies(copy(50, 1, row(40, 'x')), copy(40, 1, row(40))), { kind: 'diverged', sequence: 40 }));
});

describe('tiered write-behind: a Redis behind PostgreSQL never overwrites it', () => {
  it('load: PostgreSQL ahead by link replaces the older Redis copy, with the epoch raised so the old executor is fenced out', async () => {
    const { store, pg, raw, prefix } = await setup('load-ahead');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 5);
    await store.drain();
    await restoreOlderCopy(raw, prefix, (await pg.loadRun('r1'))!, 3);

    const loaded = await store.loadRun('r1');
    assert.deepEqual(
      loaded?.steps.map((s) => s.checkpointId),
      (await pg.listSteps('r1')).map((s) => s.checkpointId),
      "PostgreSQL's five rows, not Redis's three",
    );
    assert.equal(store.stats.copiesReplaced, 1);
    assert.ok((await raw.getRun('r1'))!.leaseEpoch >= epoch + HYDRATION_EPOCH_JUMP, 'epoch raised past both copies');
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 6), run: cursorAt(6), fence: { epoch } }), withCode('LEASE_LOST'));
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 4), run: cursorAt(4), fence: { epoch } }), withCode('LEASE_LOST'));
  });

  it('load: same rows but PostgreSQL saw a later lease epoch (Redis lost a grant): the copy is replaced, so that epoch is never handed out twice', async () => {
    const { store, pg, raw, prefix } = await setup('load-epoch');
    await leasedRun(store, 'r1');
    const older = await appendSteps(store, 'r1', (await store.getRun('r1'))!.leaseEpoch, 3).then(async () => {
      await store.drain();
      return (await pg.loadRun('r1'))!;
    });
    await store.setLeaseExpiry('r1', 'worker-a', older.run.leaseEpoch, 0); // worker-a's lease lapses...
    const taken = await store.acquireLease('r1', 'worker-b', 60_000); // ...worker-b takes the run (still running somewhere)
    assert.ok(taken);
    await store.drain(); // PostgreSQL saw worker-b's epoch; Redis then comes back from before it
    await restoreOlderCopy(raw, prefix, older, 3);

    assert.equal((await store.loadRun('r1'))?.steps.length, 3);
    assert.equal(store.stats.copiesReplaced, 1);
    const next = await store.acquireLease('r1', 'worker-c', 60_000);
    assert.ok(next && next.epoch > taken.epoch, `worker-c gets an epoch past worker-b's ${taken.epoch}, not ${next?.epoch}`);
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 4), run: cursorAt(4), fence: { epoch: taken.epoch } }), withCode('LEASE_LOST'));
  });

  it('flusher: a replayed journal entry of the older copy neither regresses PostgreSQL nor links new rows to a row it never had', async () => {
    const { store, pg, raw, prefix } = await setup('flusher-behind');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 5);
    await store.updateRun('r1', { status: 'completed' }, { epoch });
    await store.drain();
    const before = await pg.loadRun('r1');
    await restoreOlderCopy(raw, prefix, before!, 3);
    await admin.xadd(`${prefix}journal`, '*', ...journalFields({ r: 'r1', k: 'u' })); // an entry the snapshot held unflushed
    await store.drain();

    const after = await pg.loadRun('r1');
    assert.deepEqual([after?.run.status, after?.run.lastSequence], ['completed', 5], 'PostgreSQL keeps its run row');
    assert.deepEqual(
      after?.steps.map((s) => s.checkpointId),
      before?.steps.map((s) => s.checkpointId),
    );
    assert.equal(store.stats.copiesReplaced, 1, "the flusher dropped Redis's older copy");
    assert.equal(await raw.getRun('r1'), null);
    const back = await store.loadRun('r1'); // brought back from PostgreSQL, its epoch raised past the old copy's
    assert.deepEqual([back?.run.status, back?.steps.length], ['completed', 5]);
    assert.ok(back!.run.leaseEpoch >= epoch + HYDRATION_EPOCH_JUMP);
    assert.equal(store.stats.divergences, 0);
  });

  it('flusher: rows Redis re-ran on its older copy are never chained onto PostgreSQL’s history (TIER_DIVERGED, PostgreSQL untouched)', async () => {
    const { store, pg, raw, prefix } = await setup('flusher-diverged');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 5);
    await store.drain();
    const before = await pg.loadRun('r1');
    await restoreOlderCopy(raw, prefix, before!, 3);
    // An executor goes on from Redis's step 3 without the store's load check: rows 4-7 of another history.
    for (let sequence = 4; sequence <= 7; sequence++) {
      await raw.appendStep({ step: stepRecord('r1', sequence, { checkpointId: `rerun-${sequence}` }), run: cursorAt(sequence), fence: { epoch } });
    }
    await store.drain();

    assert.deepEqual(
      (await pg.listSteps('r1')).map((s: StepRecord) => s.checkpointId),
      before?.steps.map((s) => s.checkpointId),
      'PostgreSQL keeps its five rows',
    );
    assert.ok(store.stats.divergences >= 1);
    await assert.rejects(store.loadRun('r1'), withCode('TIER_DIVERGED'));
    assert.equal(await store.adoptPostgresCopy('r1'), true);
    assert.equal((await store.loadRun('r1'))?.steps.length, 5);
    assert.equal(await store.adoptPostgresCopy('unknown'), false, 'nothing to adopt for a run PostgreSQL does not have');
  });

  it('a truncation not yet flushed is not taken for lost data: the load keeps Redis’s shorter copy and PostgreSQL follows it', async () => {
    const proxy = await TcpProxy.start({ port: 5432 });
    cleanups.push(() => proxy.close());
    const { store, pg } = await setup('pending-truncate', proxy.url('postgres'));
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 5);
    await store.drain();
    proxy.cut();
    await store.truncateSteps('r1', 4, { cursorAgent: 0, cursorStep: 3 }, { epoch });
    proxy.restore(); // the load's check reaches PostgreSQL, which still has five rows
    const loaded = await store.loadRun('r1');
    assert.deepEqual(
      loaded?.steps.map((s) => s.sequence),
      [1, 2, 3],
    );
    assert.equal(store.stats.copiesReplaced, 0);
    await store.drain(15_000);
    assert.deepEqual(
      (await pg.listSteps('r1')).map((s) => s.sequence),
      [1, 2, 3],
    );
  });

  it('a PostgreSQL that does not answer does not hold up a load: Redis serves it unchecked after redis.commandTimeoutMs', async () => {
    const proxy = await TcpProxy.start({ port: 5432 });
    cleanups.push(() => proxy.close());
    const { store } = await setup('pg-hung', proxy.url('postgres'));
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 2);
    await store.drain();
    proxy.freeze();
    try {
      assert.equal((await store.loadRun('r1'))?.steps.length, 2);
    } finally {
      proxy.restore(); // the frozen queries complete, and the store can close
    }
  });
});
