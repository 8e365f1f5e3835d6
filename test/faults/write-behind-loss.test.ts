import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { afterEach, describe, it } from 'node:test';
import { Container } from 'inversify';
import { TOKENS, Waypoint } from '../../src/index';
import { tieredStorage } from '../../src/storage/tiered/module';
import type { WriteBehindCheckpointStore } from '../../src/storage/tiered/write-behind-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { TcpProxy } from '../helpers/tcp-proxy';
import { PrivateRedis } from '../helpers/tiered-fixture';
import { MemoryLogger } from '../lease/backends';

// The write-behind loss window, for real: a private Redis without persistence (its own port and temp
// dir, never the shared server) is killed with SIGKILL and started again empty. What the journal had
// carried to PostgreSQL survives; what it had not is lost, and those steps run again on resume.
const STEPS = 8;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function writeBehindWaypoint(name: string) {
  const redis = await PrivateRedis.start();
  const pgProxy = await TcpProxy.start({ port: 5432 });
  const schema = schemaFor(`faults: write-behind ${name}`);
  await dropSchema(schema);
  const logger = new MemoryLogger();
  const container = new Container();
  container.bind(TOKENS.Logger).toConstantValue(logger);
  const waypoint = await Waypoint.create({
    container,
    modules: [
      tieredStorage({
        mode: 'write-behind',
        redis: { url: redis.url, keyPrefix: 'wb:' },
        postgres: { url: pgProxy.url('postgres'), schema, poolSize: 3 },
        writeBehind: { blockMs: 20 },
      }),
    ],
    workerId: `write-behind-${name}`,
    leaseTtlMs: 2_000,
  });
  const truth = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 1 });
  await truth.init();
  cleanups.push(async () => {
    await waypoint.close();
    await truth.close();
    await pgProxy.close();
    await redis.stop();
    await dropSchema(schema);
  });
  return { waypoint, store: waypoint.store as WriteBehindCheckpointStore, redis, pgProxy, truth };
}

/** Calls `fn` until the store's client has reconnected (a supervisor restarting the run would do the same). */
async function onceReachable<T>(fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      if ((error as { code?: string }).code !== 'STORE_UNAVAILABLE' || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

function countingPipeline(name: string, onStep: (index: number, runs: number) => void | Promise<void>) {
  const runs = new Map<number, number>();
  const pipeline = syntheticPipeline({
    name,
    steps: STEPS,
    onStep: async (_ctx, index) => {
      runs.set(index, (runs.get(index) ?? 0) + 1);
      await onStep(index, runs.get(index)!);
    },
  });
  return { pipeline, counts: () => Array.from({ length: STEPS }, (_, i) => runs.get(i) ?? 0) };
}

describe('faults: the write-behind loss window', () => {
  it('Redis loses its data: the flushed steps survive in PostgreSQL, the unflushed ones are lost and run again', async () => {
    const { waypoint, store, redis, pgProxy, truth } = await writeBehindWaypoint('loss');
    const flushedBefore = 3;
    const { pipeline, counts } = countingPipeline('WriteBehindLoss', async (index, runs) => {
      if (index === flushedBefore && runs === 1) {
        await store.drain(); // steps 1-3 are in PostgreSQL...
        pgProxy.cut(); // ...and nothing after them will get there before Redis dies
      }
    });
    const first = await waypoint.run(pipeline, { runId: 'r1', input: {} });
    assert.deepEqual([first.status, first.lastSequence], ['completed', STEPS], 'the run completes on Redis alone');
    assert.equal((await store.backlog()) > 0, true, 'its last steps wait in the journal');
    assert.equal((await truth.getRun('r1'))?.lastSequence, flushedBefore);

    await redis.crash();
    await redis.boot(); // empty: no RDB, no AOF
    pgProxy.restore();

    const resumed = await onceReachable(() => waypoint.run(pipeline, { runId: 'r1' }));
    assert.deepEqual([resumed.status, resumed.stepsSkipped, resumed.stepsExecuted], ['completed', flushedBefore, STEPS - flushedBefore]);
    assert.deepEqual(counts(), [1, 1, 1, 2, 2, 2, 2, 2], 'exactly the unflushed steps ran twice');
    assert.deepEqual(resumed.state, first.state, 'the re-run reaches the same state');
    await store.drain(15_000);
    const durable = await truth.loadRun('r1');
    assert.deepEqual([durable?.run.status, durable?.steps.length], ['completed', STEPS]);
    assert.ok(store.stats.cacheMisses >= 1, 'the run was brought back from PostgreSQL');
  });

  it('Redis loses its data after the journal was flushed: nothing is lost and nothing runs again', async () => {
    const { waypoint, store, redis, truth } = await writeBehindWaypoint('flushed');
    const { pipeline, counts } = countingPipeline('WriteBehindFlushed', () => undefined);
    const first = await waypoint.run(pipeline, { runId: 'r1', input: {} });
    await store.drain();
    await redis.crash();
    await redis.boot();
    const again = await onceReachable(() => waypoint.run(pipeline, { runId: 'r1' }));
    assert.deepEqual([again.status, again.stepsExecuted, again.lastSequence], ['completed', 0, STEPS]);
    assert.deepEqual(again.state, first.state);
    assert.deepEqual(counts(), Array(STEPS).fill(1));
    assert.equal((await truth.getRun('r1'))?.status, 'completed');
  });
});
