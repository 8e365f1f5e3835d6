import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { afterEach, describe, it } from 'node:test';
import { Waypoint } from '../../src/index';
import { tieredStorage } from '../../src/storage/tiered/module';
import type { TieredCheckpointStore } from '../../src/storage/tiered/tiered-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { sleep } from '../helpers/store-records';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { TcpProxy } from '../helpers/tcp-proxy';
import { MemoryLogger, REDIS_TEST_URL, deleteKeysUnder } from '../lease/backends';

// The tiered store (write-through) with Redis behind a proxy of the test's own: Redis going away in the
// middle of a run, or hanging, never fails the run; PostgreSQL carries it to the end.
const STEPS = 8;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function tieredWaypoint(name: string, commandTimeoutMs?: number) {
  const proxy = await TcpProxy.start({ port: Number(new URL(REDIS_TEST_URL).port || 6379) });
  const schema = schemaFor(`faults: ${name}`);
  const prefix = `wp-test:faults:${schema}:`;
  await dropSchema(schema);
  const logger = new MemoryLogger();
  const waypoint = await Waypoint.create({
    modules: [tieredStorage({ redis: { url: proxy.url('redis'), keyPrefix: prefix, commandTimeoutMs }, postgres: { url: PG_TEST_URL, schema, poolSize: 3 }, logger })],
    workerId: `faults-${name}`,
    leaseTtlMs: 2_000,
  });
  const truth = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 1 });
  await truth.init();
  cleanups.push(async () => {
    await waypoint.close();
    await truth.close();
    await proxy.close();
    await dropSchema(schema);
    await deleteKeysUnder(prefix);
  });
  return { waypoint, store: waypoint.store as TieredCheckpointStore, proxy, logger, truth };
}

function countingPipeline(name: string, onStep: (index: number) => void | Promise<void>) {
  const runs = new Map<number, number>();
  const pipeline = syntheticPipeline({
    name,
    steps: STEPS,
    payloadBytes: 1024,
    onStep: async (_ctx, index) => {
      runs.set(index, (runs.get(index) ?? 0) + 1);
      await onStep(index);
    },
  });
  return { pipeline, runs };
}

describe('faults: Redis unreachable under the tiered store', () => {
  it('Redis cut off mid-run: the run completes from PostgreSQL, every step once, the outage counted and logged', async () => {
    const { waypoint, store, proxy, logger, truth } = await tieredWaypoint('redis-cut');
    const { pipeline, runs } = countingPipeline('RedisCut', (index) => {
      if (index === 3) proxy.cut();
    });
    const result = await waypoint.run(pipeline, { runId: 'r1', input: {} });
    assert.deepEqual([result.status, result.stepsExecuted, result.lastSequence], ['completed', STEPS, STEPS]);
    assert.deepEqual([...runs.values()], Array(STEPS).fill(1), 'no step ran twice');
    await store.settle();
    const durable = await truth.loadRun('r1');
    assert.deepEqual(
      durable?.steps.map((s) => s.stepName),
      Array.from({ length: STEPS }, (_, i) => `s${i}`),
      'all of it is in PostgreSQL',
    );
    assert.equal(durable?.run.status, 'completed');
    // the copies of the steps after the cut failed (they are sent in batches, so at least one command)
    assert.ok(store.stats.redisFallbacks >= 1, `fallbacks counted (${store.stats.redisFallbacks})`);
    assert.equal(logger.warnings.filter((w) => /Redis unavailable/.test(w.message)).length, 1);
    // Reads during the outage come from PostgreSQL too.
    assert.equal((await waypoint.checkpoint('r1')).checkpoint_sequence, STEPS);
  });

  it('Redis down when a paused run resumes: it loads from PostgreSQL and completes; with Redis back, loads use it again', async () => {
    const { waypoint, store, proxy, truth } = await tieredWaypoint('redis-down-on-resume');
    const stop = new AbortController();
    const { pipeline, runs } = countingPipeline('RedisDownOnResume', (index) => {
      if (index === 2) stop.abort('pause for the test');
    });
    const paused = await waypoint.run(pipeline, { runId: 'r1', input: {}, signal: stop.signal });
    assert.deepEqual([paused.status, paused.lastSequence], ['paused', 3]);
    await store.settle();
    proxy.cut();
    const misses = store.stats.cacheMisses;
    const resumed = await waypoint.run(pipeline, { runId: 'r1' });
    assert.deepEqual([resumed.status, resumed.stepsSkipped, resumed.stepsExecuted], ['completed', 3, STEPS - 3]);
    assert.deepEqual([...runs.values()], Array(STEPS).fill(1));
    assert.equal(store.stats.cacheMisses, misses, 'an outage is a fallback, not a cache miss');
    assert.equal((await truth.getRun('r1'))?.status, 'completed');

    proxy.restore();
    const hits = store.stats.cacheHits;
    const deadline = Date.now() + 5_000;
    while (store.stats.cacheHits === hits && Date.now() < deadline) {
      await waypoint.checkpoint('r1'); // the first loads refill the copy that missed the outage
      await store.settle();
      await sleep(50);
    }
    assert.ok(store.stats.cacheHits > hits, 'loads use Redis again once it is back');
    assert.deepEqual((await waypoint.checkpoint('r1')).shared_context, resumed.state);
  });

  it('Redis hanging mid-run (connections open, no replies) does not hold up the steps', async () => {
    const { waypoint, store, proxy } = await tieredWaypoint('redis-hang', 300);
    const { pipeline } = countingPipeline('RedisHang', (index) => {
      if (index === 2) proxy.freeze();
    });
    const started = Date.now();
    const result = await waypoint.run(pipeline, { runId: 'r1', input: {} });
    const elapsed = Date.now() - started;
    assert.equal(result.status, 'completed');
    // Cache writes are not waited for; only the resume-time load could wait (commandTimeoutMs), and it ran before the freeze.
    assert.ok(elapsed < 3_000, `the run took ${elapsed} ms`);
    await store.settle();
    assert.ok(store.stats.redisFallbacks >= 1, 'the timed-out cache writes were counted');
  });
});
