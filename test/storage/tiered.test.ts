import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { after, afterEach, describe, it } from 'node:test';
import { Container } from 'inversify';
import { Redis } from 'ioredis';
import { TOKENS } from '../../src/contract/tokens';
import { tieredStorage } from '../../src/storage/tiered/module';
import { StepCache } from '../../src/storage/tiered/step-cache';
import { TieredCheckpointStore } from '../../src/storage/tiered/tiered-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { appendSteps, cursorAt, leasedRun, sleep, stepRecord, withCode } from '../helpers/store-records';
import { TcpProxy } from '../helpers/tcp-proxy';
import { MemoryLogger, REDIS_TEST_URL as REDIS_URL, deleteKeysUnder } from '../lease/backends';
import { runStoreConformance } from '../../src/testing';
import { twoTierFixture } from '../helpers/tiered-fixture';

// Write-through: a fresh PostgreSQL schema (named from the test) and a fresh Redis key prefix per test,
// both removed afterwards.
runStoreConformance({
  name: 'tiered write-through',
  makeStore: (testName) =>
    twoTierFixture(
      testName,
      'tier',
      (p) => new TieredCheckpointStore({ redis: { url: REDIS_URL, keyPrefix: p.prefix }, postgres: { url: p.pgUrl, schema: p.schema, poolSize: 4 } }),
    ),
});

// Below, what the contract suite cannot see: the Redis copy is used when it matches PostgreSQL and
// ignored when it does not, and Redis trouble is a counted, logged fallback instead of an error.
const admin = new Redis(REDIS_URL);
after(() => admin.disconnect());

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Setup {
  store: TieredCheckpointStore;
  /** A plain PostgreSQL store on the same schema: the truth, and a writer that bypasses the cache. */
  pg: TypeOrmCheckpointStore;
  prefix: string;
  logger: MemoryLogger;
}

async function setup(name: string, redisUrl = REDIS_URL, commandTimeoutMs?: number): Promise<Setup> {
  const schema = schemaFor(`tiered cache: ${name}`);
  const prefix = `wp-test:tier:${randomUUID()}:`;
  await dropSchema(schema);
  const logger = new MemoryLogger();
  const store = new TieredCheckpointStore({ redis: { url: redisUrl, keyPrefix: prefix, commandTimeoutMs }, postgres: { url: PG_TEST_URL, schema, poolSize: 3 }, logger });
  const pg = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 2 });
  await store.init();
  await pg.init();
  cleanups.push(async () => {
    await store.close();
    await pg.close();
    await dropSchema(schema);
    await deleteKeysUnder(prefix);
  });
  return { store, pg, prefix, logger };
}

/** Lets the store's background cache writes land (they are issued after the PostgreSQL commit). */
const settled = (store: TieredCheckpointStore) => store.settle();

describe('tiered write-through: the Redis copy of the step log', () => {
  it('a load reads the step rows from Redis when they match PostgreSQL, and equals PostgreSQL', async () => {
    const { store, pg, prefix } = await setup('hit');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 5);
    await settled(store);
    assert.equal(await admin.hget(`${prefix}steps:{r1}`, '_last'), '5');
    const before = store.stats;
    const loaded = await store.loadRun('r1');
    assert.deepEqual(loaded, await pg.loadRun('r1'));
    assert.equal(store.stats.cacheHits, before.cacheHits + 1);
    assert.equal(store.stats.cacheMisses, before.cacheMisses);
    const ttl = await admin.ttl(`${prefix}steps:{r1}`);
    assert.ok(ttl > 86_000 && ttl <= 86_400, `the copy expires after cacheTtlSeconds (ttl ${ttl})`);
  });

  it('a write that bypassed the cache makes the copy a miss, never a stale answer; the copy is refilled', async () => {
    const { store, pg } = await setup('bypass');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 3);
    await appendSteps(pg, 'r1', epoch, 1, 4); // straight into PostgreSQL
    await settled(store);
    const misses = store.stats.cacheMisses;
    assert.deepEqual(await store.loadRun('r1'), await pg.loadRun('r1'));
    assert.equal(store.stats.cacheMisses, misses + 1);
    await settled(store);
    const hits = store.stats.cacheHits;
    assert.equal((await store.loadRun('r1'))?.steps.length, 4);
    assert.equal(store.stats.cacheHits, hits + 1, 'refilled from PostgreSQL');
  });

  it('a copy that differs from PostgreSQL in any way the stamp can see is not used', async () => {
    const { store, pg, prefix } = await setup('tampered');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 4);
    await settled(store);
    const key = `${prefix}steps:{r1}`;
    const truth = await pg.loadRun('r1');
    const tamper = async (mutate: () => Promise<unknown>, what: string) => {
      await mutate();
      const misses = store.stats.cacheMisses;
      assert.deepEqual(await store.loadRun('r1'), truth, what);
      assert.equal(store.stats.cacheMisses, misses + 1, `${what}: counted as a miss`);
      await settled(store); // refilled from PostgreSQL for the next case
    };
    await tamper(() => admin.hset(key, '4', '{not json'), 'an unreadable entry');
    await tamper(() => admin.hdel(key, '2'), 'a hole in the middle');
    await tamper(async () => admin.hset(key, '4', (await admin.hget(key, '4'))!.replace('r1-cp-4', 'other-cp')), 'another last step');
    await tamper(async () => admin.hset(key, '1', (await admin.hget(key, '1'))!.replace('r1-cp-1', 'other-cp')), 'another first step');
    await tamper(() => admin.hset(key, '_last', '3'), 'a shorter log');
    await tamper(() => admin.del(key), 'no copy at all');
  });

  it('truncation and retention are mirrored, so the copy stays usable', async () => {
    const { store, pg } = await setup('mirror');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 6);
    await store.truncateSteps('r1', 5, { cursorAgent: 0, cursorStep: 4 }, { epoch });
    await appendSteps(store, 'r1', epoch, 2, 5);
    await store.compactSteps('r1', stepRecord('r1', 3, { checkpointId: 'base-3' }));
    await settled(store);
    const hits = store.stats.cacheHits;
    const loaded = await store.loadRun('r1');
    assert.deepEqual(loaded, await pg.loadRun('r1'));
    assert.deepEqual(
      loaded?.steps.map((s) => s.sequence),
      [3, 4, 5, 6],
    );
    assert.equal(store.stats.cacheHits, hits + 1);
  });

  it('copies of steps committed together go to Redis as one command, and a load sends queued copies first', async () => {
    const schema = schemaFor('tiered cache: batched copies');
    const prefix = `wp-test:tier:${randomUUID()}:`;
    await dropSchema(schema);
    const client = new Redis(REDIS_URL);
    const sent: string[] = [];
    const send = client.sendCommand.bind(client);
    client.sendCommand = (command, stream) => {
      sent.push(command.name);
      return send(command, stream);
    };
    const store = new TieredCheckpointStore({ redis: { client, keyPrefix: prefix }, postgres: { url: PG_TEST_URL, schema, poolSize: 2 } });
    await store.init();
    cleanups.push(async () => {
      await store.close();
      client.disconnect();
      await dropSchema(schema);
      await deleteKeysUnder(prefix);
    });
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 2);
    await settled(store);
    const before = sent.length;
    await store.appendRun([3, 4, 5].map((sequence) => ({ step: stepRecord('r1', sequence), run: cursorAt(sequence), fence: { epoch } })));
    await settled(store);
    const scripts = sent.slice(before).filter((name) => name === 'evalsha' || name === 'eval');
    assert.equal(scripts.length, 1, `one copy command for three steps (sent: ${sent.slice(before).join(', ')})`);
    assert.equal(await admin.hget(`${prefix}steps:{r1}`, '_last'), '5');

    // No settle: the load itself sends the queued copies ahead of its read, so it is a hit.
    await appendSteps(store, 'r1', epoch, 2, 6);
    const hits = store.stats.cacheHits;
    assert.equal((await store.loadRun('r1'))?.steps.length, 7);
    assert.equal(store.stats.cacheHits, hits + 1);
  });

  it('a step that does not extend the copy by one drops it (a late or missed write)', async () => {
    const { store, prefix } = await setup('gap');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 2);
    await settled(store);
    await admin.hset(`${prefix}steps:{r1}`, '_last', '1'); // as if the write of step 2 never arrived
    await appendSteps(store, 'r1', epoch, 1, 3);
    await settled(store);
    assert.equal(await admin.exists(`${prefix}steps:{r1}`), 0);
    assert.equal((await store.loadRun('r1'))?.steps.length, 3);
  });

  it('a deleted and re-created run id never sees the old copy', async () => {
    const { store, pg } = await setup('recreate');
    let epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 3);
    await pg.deleteRun('r1'); // bypassing the cache: the old copy stays in Redis
    epoch = await leasedRun(pg, 'r1');
    await pg.appendStep({ step: stepRecord('r1', 1, { checkpointId: 'new-1' }), run: cursorAt(1), fence: { epoch } });
    await settled(store);
    assert.deepEqual(
      (await store.loadRun('r1'))?.steps.map((s) => s.checkpointId),
      ['new-1'],
    );
  });
});

describe('tiered write-through: payloads rewritten in place (re-encryption)', () => {
  it('drop the copy, which the stamp could not tell from the new text; a refill from an older read is refused', async () => {
    const { store, pg, prefix } = await setup('rewrite');
    const epoch = await leasedRun(store, 'r1');
    const steps = await appendSteps(store, 'r1', epoch, 3);
    await settled(store);
    const hits = store.stats.cacheHits;
    assert.deepEqual((await store.loadRun('r1'))?.steps, steps);
    assert.equal(store.stats.cacheHits, hits + 1, 'served by the copy');
    // A load that read PostgreSQL before the rewrite and refills after it, seen from its own client.
    const racerClient = new Redis(REDIS_URL);
    cleanups.push(() => Promise.resolve(racerClient.disconnect()));
    const racer = new StepCache(StepCache.define(racerClient), prefix, 60);
    const before = await racer.read('r1');
    const oldRows = (await pg.loadRun('r1'))!.steps;

    const outcome = await store.rewritePayloads('r1', { steps: [{ sequence: 2, output: { from: steps[1].output, to: 'sealed:2' } }] });
    assert.deepEqual(outcome, { rewritten: 1, skipped: 0 });
    assert.equal(await admin.exists(`${prefix}steps:{r1}`), 0, 'the copy is gone at once (not in the background)');
    assert.equal(await racer.fill('r1', 3, oldRows, before.generation), 'STALE');
    assert.equal(await admin.exists(`${prefix}steps:{r1}`), 0, 'the old text did not come back');

    const [misses, hitsAfter] = [store.stats.cacheMisses, store.stats.cacheHits];
    assert.equal((await store.loadRun('r1'))?.steps[1]?.output, 'sealed:2');
    assert.equal(store.stats.cacheMisses, misses + 1, 'the first load reads PostgreSQL');
    await settled(store);
    assert.equal((await store.loadRun('r1'))?.steps[1]?.output, 'sealed:2');
    assert.equal(store.stats.cacheHits, hitsAfter + 1, 'the second is served by the copy it refilled');
  });

  it('fail with TIER_COPY_NOT_DROPPED when Redis cannot drop the copy; PostgreSQL keeps the rewrite', async () => {
    const proxy = await TcpProxy.start({ port: 6379 });
    cleanups.push(() => proxy.close());
    const { store, pg } = await setup('rewrite-redis-down', proxy.url('redis'), 500);
    const epoch = await leasedRun(store, 'r1');
    const steps = await appendSteps(store, 'r1', epoch, 2);
    await settled(store);
    proxy.cut();
    const rewrite = store.rewritePayloads('r1', { steps: [{ sequence: 1, output: { from: steps[0].output, to: 'sealed:1' } }] });
    await assert.rejects(
      rewrite,
      (error: Error & { code?: string }) => error.code === 'TIER_COPY_NOT_DROPPED' && /run 'r1'/.test(error.message) && /steps:\{r1\}/.test(error.message),
    );
    assert.equal((await pg.listSteps('r1'))[0]?.output, 'sealed:1');
  });
});

describe('tiered write-through: step transactions (transactional side effects)', () => {
  it('are PostgreSQL transactions; a committed step reaches the Redis copy, a rolled-back one nothing', async () => {
    const { store, pg } = await setup('transactions');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 1);
    const rolledBack = await store.beginTransaction('r1', { epoch });
    await rolledBack.appendStep({ step: stepRecord('r1', 2, { checkpointId: 'undone' }), run: cursorAt(2), fence: { epoch } });
    await rolledBack.rollback();
    const tx = await store.beginTransaction('r1', { epoch });
    await tx.recordOperation({ operationKey: 'op-1', runId: 'r1', stepKey: 'research/step2', name: 'book' }, { state: 'committed', result: '"ok"' });
    await tx.appendStep({ step: stepRecord('r1', 2), run: cursorAt(2), fence: { epoch } });
    await tx.commit();
    await settled(store);
    const hits = store.stats.cacheHits;
    const loaded = await store.loadRun('r1');
    assert.deepEqual(loaded, await pg.loadRun('r1'));
    assert.deepEqual(
      loaded?.steps.map((s) => s.checkpointId),
      ['r1-cp-1', 'r1-cp-2'],
    );
    assert.equal(store.stats.cacheHits, hits + 1, 'the committed step extended the copy');
    assert.equal((await store.getOperation('op-1'))?.state, 'committed');
    await assert.rejects(store.beginTransaction('r1', { epoch: epoch + 1 }), withCode('LEASE_LOST'));
  });
});

describe('tiered write-through: Redis trouble is a fallback, not an error', () => {
  it('with Redis cut off, writes commit in PostgreSQL, loads are served by it, and the outage is counted and logged once', async () => {
    const proxy = await TcpProxy.start({ port: 6379 });
    cleanups.push(() => proxy.close());
    const { store, pg, logger } = await setup('outage', proxy.url('redis'));
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 2);
    await settled(store);
    proxy.cut();
    await appendSteps(store, 'r1', epoch, 3, 3);
    await settled(store);
    const loaded = await store.loadRun('r1');
    assert.deepEqual(loaded, await pg.loadRun('r1'));
    assert.equal(loaded?.steps.length, 5);
    // the copies of steps 3-5 go out as one command (settle sends them at once), then the load's read
    assert.ok(store.stats.redisFallbacks >= 2, `fallbacks counted (${store.stats.redisFallbacks})`);
    const outageWarnings = logger.warnings.filter((w) => /Redis unavailable/.test(w.message));
    assert.equal(outageWarnings.length, 1, 'one warning for the outage, not one per step');
    assert.equal(outageWarnings[0].fields?.operation, 'appendStep');

    proxy.restore();
    const hitsBefore = store.stats.cacheHits;
    const deadline = Date.now() + 5_000;
    // ioredis reconnects on its own; the copy missed steps 3-5, so the first loads miss and refill it.
    while (store.stats.cacheHits === hitsBefore && Date.now() < deadline) {
      assert.equal((await store.loadRun('r1'))?.steps.length, 5);
      await settled(store);
      await sleep(50);
    }
    assert.ok(store.stats.cacheHits > hitsBefore, 'back on the fast path once Redis is reachable');
    assert.ok(logger.warnings.some((w) => /Redis answers again/.test(w.message)));
  });

  it('a Redis that hangs costs at most commandTimeoutMs per load, then PostgreSQL answers', async () => {
    const proxy = await TcpProxy.start({ port: 6379 });
    cleanups.push(() => proxy.close());
    const { store } = await setup('hung', proxy.url('redis'), 200);
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 2);
    await settled(store);
    proxy.freeze();
    const started = Date.now();
    assert.equal((await store.loadRun('r1'))?.steps.length, 2);
    assert.ok(Date.now() - started < 1_500, `took ${Date.now() - started} ms`);
    assert.ok(store.stats.redisFallbacks >= 1);
  });

  it('a store whose Redis is down from the start initializes and works on PostgreSQL alone', async () => {
    const { store } = await setup('down-at-start', 'redis://127.0.0.1:1');
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 2);
    assert.equal((await store.loadRun('r1'))?.steps.length, 2);
    assert.ok(store.stats.redisFallbacks >= 2);
  });

  it('PostgreSQL stays the truth: its outage fails the call with STORE_UNAVAILABLE', async () => {
    const proxy = await TcpProxy.start({ port: 5432 });
    cleanups.push(() => proxy.close());
    const schema = schemaFor('tiered cache: pg down');
    await dropSchema(schema);
    const prefix = `wp-test:tier:${randomUUID()}:`;
    const store = new TieredCheckpointStore({ redis: { url: REDIS_URL, keyPrefix: prefix }, postgres: { url: proxy.url('postgres'), schema, poolSize: 2 } });
    cleanups.push(async () => (await store.close(), await dropSchema(schema), await deleteKeysUnder(prefix)));
    await store.init();
    const epoch = await leasedRun(store, 'r1');
    proxy.cut();
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch } }), withCode('STORE_UNAVAILABLE'));
    await assert.rejects(store.loadRun('r1'), withCode('STORE_UNAVAILABLE'));
  });
});

describe('tieredStorage module', () => {
  it('binds one tiered store that warns through the container logger; bad options fail when configured', async () => {
    const container = new Container();
    const logger = new MemoryLogger();
    container.bind(TOKENS.Logger).toConstantValue(logger);
    await container.loadAsync(tieredStorage({ redis: { url: 'redis://127.0.0.1:1' }, postgres: { url: PG_TEST_URL, schema: schemaFor('tiered module') } }));
    const store = container.get(TOKENS.CheckpointStore);
    assert.ok(store instanceof TieredCheckpointStore);
    assert.equal(store.backend, 'tiered');
    assert.equal(container.get(TOKENS.CheckpointStore), store, 'a singleton');
    await store.init();
    cleanups.push(async () => (await store.close(), await dropSchema(schemaFor('tiered module'))));
    assert.equal(await store.getRun('none'), null);
    assert.ok(
      logger.warnings.some((w) => /Redis unavailable/.test(w.message)),
      'the warning went to the bound logger',
    );
    for (const bad of [
      {},
      { postgres: { url: '' } },
      { postgres: { url: PG_TEST_URL, schema: 'bad-schema!' } },
      { postgres: { url: PG_TEST_URL }, mode: 'write-around' },
      { postgres: { url: PG_TEST_URL }, redis: { cacheTtlSeconds: 0.5 } },
      { postgres: { url: PG_TEST_URL }, redis: { commandTimeoutMs: 0 } },
    ]) {
      assert.throws(
        () => tieredStorage(bad as never),
        (err: { code?: string }) => ['INVALID_OPTIONS', 'INVALID_STORE_OPTIONS'].includes(err.code ?? ''),
        JSON.stringify(bad),
      );
    }
  });
});
