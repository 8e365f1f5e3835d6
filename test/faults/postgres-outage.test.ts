import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { afterEach, describe, it } from 'node:test';
import { Container, type ContainerModule } from 'inversify';
import { TOKENS, Waypoint, postgresStorage } from '../../src/index';
import { tieredStorage } from '../../src/storage/tiered/module';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { TcpProxy } from '../helpers/tcp-proxy';
import { MemoryLogger, REDIS_TEST_URL, deleteKeysUnder } from '../lease/backends';

// PostgreSQL is the durable truth of the postgres and tiered stores. Cut off (through a proxy of the
// test's own) in the middle of a run, the run stops with STORE_UNAVAILABLE and nothing half-written;
// once PostgreSQL is reachable again the same call resumes from the last committed step.
const STEPS = 6;
const CUT_AT = 3;
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const backends: { name: string; module: (pgUrl: string, schema: string, prefix: string, logger: MemoryLogger) => ContainerModule }[] = [
  { name: 'postgres', module: (url, schema) => postgresStorage({ url, schema, poolSize: 3 }) },
  {
    name: 'tiered',
    module: (url, schema, prefix, logger) => tieredStorage({ redis: { url: REDIS_TEST_URL, keyPrefix: prefix }, postgres: { url, schema, poolSize: 3 }, logger }),
  },
];

describe('faults: PostgreSQL unreachable mid-run', () => {
  for (const backend of backends) {
    it(`${backend.name}: the run stops with STORE_UNAVAILABLE, then resumes cleanly once PostgreSQL is back`, async () => {
      const proxy = await TcpProxy.start({ port: 5432 });
      const schema = schemaFor(`faults: postgres outage ${backend.name}`);
      const prefix = `wp-test:faults:${schema}:`;
      await dropSchema(schema);
      const logger = new MemoryLogger();
      const container = new Container();
      container.bind(TOKENS.Logger).toConstantValue(logger); // the outage's lease warnings stay out of the test output
      const waypoint = await Waypoint.create({
        container,
        modules: [backend.module(proxy.url('postgres'), schema, prefix, logger)],
        workerId: `pg-outage-${backend.name}`,
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

      const runs = new Map<number, number>();
      const pipeline = syntheticPipeline({
        name: `PgOutage_${backend.name}`,
        steps: STEPS,
        onStep: (_ctx, index) => {
          runs.set(index, (runs.get(index) ?? 0) + 1);
          if (index === CUT_AT && runs.get(index) === 1) proxy.cut();
        },
      });

      await assert.rejects(waypoint.run(pipeline, { runId: 'r1', input: {} }), (error: Error & { code?: string; runId?: string }) => {
        assert.equal(error.code, 'STORE_UNAVAILABLE');
        assert.equal(error.runId, 'r1');
        assert.match(error.message, /\(postgres\) failed during appendStep for run 'r1'/);
        assert.match(error.message, /resume the run once the store is reachable/);
        return true;
      });
      const stopped = await truth.loadRun('r1');
      assert.deepEqual(
        stopped?.steps.map((s) => s.sequence),
        [1, 2, 3],
        'every step before the outage is committed, nothing after',
      );
      assert.equal(stopped?.run.status, 'running');

      proxy.restore();
      const result = await waypoint.run(pipeline, { runId: 'r1' });
      assert.deepEqual([result.status, result.stepsSkipped, result.stepsExecuted, result.lastSequence], ['completed', CUT_AT, STEPS - CUT_AT, STEPS]);
      const done = await truth.loadRun('r1');
      assert.deepEqual(
        done?.steps.map((s) => s.stepName),
        Array.from({ length: STEPS }, (_, i) => `s${i}`),
        'each step recorded once, in order',
      );
      // Only the step whose checkpoint could not be written ran again.
      assert.deepEqual(
        [...runs.entries()].sort(([a], [b]) => a - b).map(([, n]) => n),
        [1, 1, 1, 2, 1, 1],
      );
    });
  }
});
