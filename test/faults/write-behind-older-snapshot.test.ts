import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { afterEach, describe, it } from 'node:test';
import { Container } from 'inversify';
import { TOKENS, Waypoint, WaypointError } from '../../src/index';
import type { TierDivergedError } from '../../src/contract/errors';
import { verifySteps } from '../../src/core/history/row-integrity';
import { tieredStorage } from '../../src/storage/tiered/module';
import type { WriteBehindCheckpointStore } from '../../src/storage/tiered/write-behind-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { TcpProxy } from '../helpers/tcp-proxy';
import { PrivateRedis } from '../helpers/tiered-fixture';
import type { LogFields, Logger } from '../../src/contract/logger';

// Issue 34, item 6: a Redis that comes back behind PostgreSQL (restarted from an older RDB snapshot, no
// AOF) must never make write-behind write a history that diverges from PostgreSQL's. A private
// redis-server (own port, own temp dir) takes a snapshot at step 15 of a 50-step run; the run goes on to
// step 41 (PostgreSQL has 1-40, the 41st is in the loss window), then Redis restarts from that snapshot.
const STEPS = 50;
const SNAPSHOT_AT = 15;
const FLUSHED = 40;
const cleanups: (() => Promise<void>)[] = [];

/** Keeps warn and error records with their level (the alert must be at error level). */
class LevelLogger implements Logger {
  readonly records: { level: 'warn' | 'error'; message: string; fields?: LogFields }[] = [];
  debug(): void {}
  info(): void {}
  warn(message: string, fields?: LogFields): void {
    this.records.push({ level: 'warn', message, fields });
  }
  error(message: string, fields?: LogFields): void {
    this.records.push({ level: 'error', message, fields });
  }
}
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(name: string) {
  const redis = await PrivateRedis.start();
  const pgProxy = await TcpProxy.start({ port: 5432 });
  const schema = schemaFor(`faults: write-behind older snapshot ${name}`);
  await dropSchema(schema);
  const logger = new LevelLogger();
  const divergences: TierDivergedError[] = [];
  const container = new Container();
  container.bind(TOKENS.Logger).toConstantValue(logger);
  const waypoint = await Waypoint.create({
    container,
    modules: [
      tieredStorage({
        mode: 'write-behind',
        redis: { url: redis.url, keyPrefix: 'wb:' },
        postgres: { url: pgProxy.url('postgres'), schema, poolSize: 3 },
        writeBehind: { blockMs: 20, onDivergence: (error) => divergences.push(error) },
      }),
    ],
    workerId: `older-snapshot-${name}`,
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
  return { waypoint, store: waypoint.store as WriteBehindCheckpointStore, redis, pgProxy, truth, logger, divergences };
}

type Setup = Awaited<ReturnType<typeof setup>>;

/** Calls `fn` until the store's clients have reconnected (a supervisor restarting the run would do the same). */
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

/**
 * The first call of the run: Redis snapshots at step 15; at step 41 PostgreSQL has 1-40 and is cut off,
 * and the run pauses after that step (so Redis holds 41 rows, PostgreSQL 40).
 */
async function runToStep41(s: Setup) {
  const runs = new Map<number, number>();
  const stop = new AbortController();
  const pipeline = syntheticPipeline({
    name: 'OlderSnapshot',
    steps: STEPS,
    onStep: async (_ctx, index) => {
      runs.set(index, (runs.get(index) ?? 0) + 1);
      if (runs.get(index) !== 1) return;
      if (index === SNAPSHOT_AT) await s.redis.save(); // rows 1-15
      if (index === FLUSHED) {
        await s.store.drain(); // rows 1-40 are in PostgreSQL...
        s.pgProxy.cut(); // ...and row 41 will not get there
        stop.abort(); // the run pauses once this step (row 41) is recorded
      }
    },
  });
  const first = await s.waypoint.run(pipeline, { runId: 'r1', input: {}, signal: stop.signal });
  assert.deepEqual([first.status, first.lastSequence], ['paused', FLUSHED + 1], 'Redis holds 41 rows');
  assert.equal((await s.truth.loadRun('r1'))?.steps.length, FLUSHED, 'PostgreSQL holds 40');
  const counts = () => Array.from({ length: STEPS }, (_, i) => runs.get(i) ?? 0);
  return { pipeline, counts };
}

/** What PostgreSQL alone holds for the run passes verify, with every one of its steps. */
async function assertPostgresVerifies(truth: TypeOrmCheckpointStore, steps: number, status: string) {
  const durable = await truth.loadRun('r1');
  assert.ok(durable, 'PostgreSQL has the run');
  verifySteps(durable.run, durable.steps); // throws CHECKPOINT_CORRUPTED naming the sequence
  assert.deepEqual([durable.run.status, durable.run.lastSequence, durable.steps.length], [status, steps, steps]);
}

describe('faults: write-behind with a Redis restarted from an older snapshot', () => {
  it('resumes from PostgreSQL (ahead), re-runs only the lost step, and PostgreSQL alone holds and verifies the whole run once Redis evicts it', async () => {
    const s = await setup('ahead');
    const { pipeline, counts } = await runToStep41(s);
    await s.redis.shutdownNoSave();
    await s.redis.boot(); // from the snapshot: the run at step 15, its journal as it was then
    s.pgProxy.restore();

    const resumed = await onceReachable(() => s.waypoint.run(pipeline, { runId: 'r1' }));
    await s.store.drain(15_000);
    await assertPostgresVerifies(s.truth, STEPS, 'completed');
    assert.deepEqual([resumed.status, resumed.stepsSkipped, resumed.stepsExecuted], ['completed', FLUSHED, STEPS - FLUSHED]);
    const expected = Array(STEPS).fill(1);
    expected[FLUSHED] = 2; // row 41 was in the loss window: it runs again, nothing before it does
    assert.deepEqual(counts(), expected);
    assert.ok(s.store.stats.copiesReplaced >= 1, "Redis's older copy was replaced by PostgreSQL's");
    assert.deepEqual([s.store.stats.divergences, s.divergences.length], [0, 0]);

    await s.redis.flushAll(); // evicted from Redis: PostgreSQL is all there is
    await assertPostgresVerifies(s.truth, STEPS, 'completed');
    const back = await s.waypoint.store.loadRun('r1'); // brought back into Redis from PostgreSQL
    assert.deepEqual([back?.run.status, back?.steps.length], ['completed', STEPS]);
    verifySteps(back!.run, back!.steps);
  });

  it('a resume that ran on the older copy while PostgreSQL was unreachable is a divergence: typed error and alert, PostgreSQL left intact, and adoptPostgresCopy continues from it', async () => {
    const s = await setup('diverged');
    const { pipeline, counts } = await runToStep41(s);
    await s.redis.shutdownNoSave();
    await s.redis.boot();
    // PostgreSQL is still cut: the load cannot compare, and the run goes on from Redis's step 15.
    const blind = await onceReachable(() => s.waypoint.run(pipeline, { runId: 'r1' }));
    assert.deepEqual([blind.status, blind.stepsSkipped], ['completed', SNAPSHOT_AT]);
    s.pgProxy.restore();

    const deadline = Date.now() + 15_000;
    while (s.divergences.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    const alert = s.divergences[0];
    assert.ok(alert, 'the flusher reported the divergence');
    assert.deepEqual([alert.code, alert.runId, alert.sequence, alert.redisLastSequence, alert.postgresLastSequence], ['TIER_DIVERGED', 'r1', FLUSHED, STEPS, FLUSHED]);
    assert.ok(s.store.stats.divergences >= 1);
    assert.ok(
      s.logger.records.some((r) => r.level === 'error' && r.fields?.code === 'TIER_DIVERGED' && r.fields?.runId === 'r1'),
      'logged at error level',
    );
    await assertPostgresVerifies(s.truth, FLUSHED, 'running'); // nothing of Redis's other history was written

    await assert.rejects(s.store.loadRun('r1'), (error: WaypointError) => error.code === 'TIER_DIVERGED' && /adoptPostgresCopy\('r1'\)/.test(error.message));
    await assert.rejects(s.waypoint.run(pipeline, { runId: 'r1' }), (error: WaypointError) => error.code === 'TIER_DIVERGED');

    assert.equal(await s.store.adoptPostgresCopy('r1'), true);
    const resumed = await s.waypoint.run(pipeline, { runId: 'r1' });
    assert.deepEqual([resumed.status, resumed.stepsSkipped, resumed.stepsExecuted], ['completed', FLUSHED, STEPS - FLUSHED]);
    assert.equal(counts()[0], 1);
    await s.store.drain(15_000);
    await s.redis.flushAll();
    await assertPostgresVerifies(s.truth, STEPS, 'completed');
  });
});
