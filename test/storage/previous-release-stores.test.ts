import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { SYSTEM_AGENT } from '../../src/core/history/row-integrity';
import { Waypoint, readPlan, WaypointError } from '../../src/index';
import { schemaFor } from '../helpers/pg-schema';
import { ReadApi } from '../../src/ui/read-api';
import { HttpError } from '../../src/ui/errors';
import { FIXTURE_PIPELINES, FixtureFlow, FixtureLine, controls, resetControls } from '../fixtures/release-0.1/pipelines';
import {
  KEEP_LAST,
  RUN_IDS,
  SEALED_ENCRYPTION,
  STOPPED,
  TEST_COMPACT,
  continueRun,
  forkAndResume,
  listing,
  plain,
  silentLogger,
  snapshotRun,
  storedRunIds,
  waypointFor,
  type ExpectedOutcomes,
  type ExpectedStore,
} from '../fixtures/release-0.1/scenario';
import { BACKENDS, FIXTURE_FILES, copySqlite, loadPostgres, loadRedis, type Backend, type LoadedStore } from '../fixtures/release-0.1/stores';

/**
 * Stores written by the previous release (issue 36): the checked-in fixture test/fixtures/release-0.1
 * (see its README.md), opened with today's Waypoint on SQLite, PostgreSQL and Redis. Every run loads as
 * that release recorded it, verifies, and the stopped ones resume to the end it reached, running only
 * what was not recorded; a fork and a compaction work on them. Every expected value was written by the
 * generator with that release's code; nothing here is recomputed by the code under test.
 */

const outcomes = JSON.parse(readFileSync(FIXTURE_FILES.outcomes, 'utf8')) as ExpectedOutcomes;

/** A fresh copy of the fixture for `backend`: a temp SQLite file, a schema of this test's own, a fresh key prefix. */
function copyOf(backend: Backend): Promise<LoadedStore> {
  if (backend === 'sqlite') return Promise.resolve(copySqlite());
  if (backend === 'postgres') return loadPostgres(schemaFor('previous-release stores on PostgreSQL'));
  return loadRedis(`wp-test:release-0.1:${randomUUID()}:`);
}

async function open(storage: () => ContainerModule, sealed: boolean): Promise<Waypoint> {
  return Waypoint.create({
    modules: [storage(), silentLogger()],
    pipelines: FIXTURE_PIPELINES,
    workerId: 'release-0.1-test',
    retention: { keepLast: KEEP_LAST },
    ...(sealed ? { encryption: SEALED_ENCRYPTION } : {}),
  });
}

for (const backend of BACKENDS) {
  describe(`stores written by release 0.1, opened today: ${backend}`, () => {
    const expected = JSON.parse(readFileSync(FIXTURE_FILES.expected(backend), 'utf8')) as ExpectedStore;
    let store: LoadedStore;
    const waypoints = {} as { plain: Waypoint; sealed: Waypoint };

    before(async () => {
      store = await copyOf(backend);
      waypoints.plain = await open(store.storage, false);
      waypoints.sealed = await open(store.storage, true);
    });

    after(async () => {
      await waypoints.sealed?.close();
      await waypoints.plain?.close();
      if (!store) return;
      await store.cleanup();
      assert.equal(await store.remains(), false, `the ${backend} copy of the fixture was left behind`);
    });

    it('holds every run the generator wrote, listed with the status, version and progress it had', async () => {
      assert.equal(expected.backend, backend);
      assert.ok(await store.remains(), 'the copy exists (what the cleanup check looks for)');
      for (const runId of RUN_IDS) assert.ok(expected.runIds.includes(runId), `the fixture lacks run ${runId}`);
      assert.deepEqual(await storedRunIds(waypoints.plain), expected.runIds);
      assert.deepEqual(await listing(waypoints.sealed), expected.list);
    });

    it('loads every run as it was recorded: run row, step rows, operations, checkpoints, and verifies it', async () => {
      for (const runId of expected.runIds) {
        const waypoint = waypointFor(waypoints, runId);
        await waypoint.verify(runId);
        assert.deepEqual(await snapshotRun(waypoint, runId), expected.runs[runId], `run ${runId} on ${backend}`);
      }
    });

    it('refuses to read a control-flow run of that release without its pipeline (its rows hold no joins), and reads a straight line', async () => {
      const bare = await Waypoint.create({ modules: [store.storage(), silentLogger()], workerId: 'release-0.1-bare' });
      try {
        const needsPipeline = (error: unknown) => error instanceof WaypointError && error.code === 'STATE_NEEDS_PIPELINE' && error.runId === 'flow-completed';
        await assert.rejects(bare.checkpoint('flow-completed'), needsPipeline);
        await assert.rejects(bare.checkpoints('flow-completed'), needsPipeline);
        assert.deepEqual(plain((await bare.checkpoint('line-completed')).shared_context), expected.runs['line-completed'].checkpoint.shared_context);
        // The timeline page without the pipeline says the same (HTTP 409) instead of drawing a state the run never had.
        const page = new ReadApi(bare.store, { plans: new Map(), integrity: {}, actionsAllowed: false });
        await assert.rejects(page.checkpoint('flow-completed', 1), (error: unknown) => error instanceof HttpError && error.status === 409 && error.code === 'STATE_NEEDS_PIPELINE');
      } finally {
        await bare.close();
      }
    });

    it('returns a completed run as recorded without running a step, and refuses to resume a cancelled one', async () => {
      for (const runId of ['line-completed', 'flow-completed', 'fanout-completed']) {
        resetControls();
        const result = await waypoints.plain.resume(runId);
        assert.equal(result.status, 'completed', runId);
        assert.equal(result.stepsExecuted, 0, runId);
        assert.deepEqual(controls.ran, [], `${runId} ran steps`);
        assert.deepEqual(plain(result.state), expected.runs[runId].checkpoint.shared_context, runId);
      }
      await assert.rejects(waypoints.plain.resume('line-cancelled'), (error: unknown) => error instanceof WaypointError && error.code === 'RUN_CANCELLED');
    });

    it('resumes every stopped run to the end that release reached, running only what was not recorded, repeating no side effect', async () => {
      for (const runId of STOPPED) {
        const waypoint = waypointFor(waypoints, runId);
        const committed = (expected.runs[runId].operations as { name: string; stepKey: string; state: string }[])
          .filter((op) => op.state === 'committed')
          .map((op) => `${op.name}@${op.stepKey}`);
        const continued = await continueRun(waypoint, runId);
        assert.deepEqual(continued, outcomes.continued[runId], `resume of ${runId} on ${backend}`);
        // Stated on its own: a side effect the fixture holds as committed is replayed, never executed again.
        assert.deepEqual(
          continued.effects.filter((effect) => committed.includes(effect)),
          [],
          runId,
        );
        await waypoint.verify(runId);
        assert.deepEqual(plain((await waypoint.checkpoint(runId)).shared_context), outcomes.continued[runId].state, runId);
      }
    });

    it('forks a completed run at a step with a state patch, and the fork resumes to the end that release reached', async () => {
      assert.deepEqual(await forkAndResume(waypoints.plain), outcomes.fork);
    });

    it('compacts a completed run of each shape into a base row without changing what it holds', async () => {
      const plans = { 'line-completed': readPlan(FixtureLine), 'flow-completed': readPlan(FixtureFlow) } as const;
      for (const runId of TEST_COMPACT) {
        const recorded = expected.runs[runId];
        const folded = await waypoints.plain.retention.compact(runId, { plan: plans[runId as keyof typeof plans] });
        assert.ok(folded > 1, `${runId}: ${folded} rows folded`);
        const loaded = (await waypoints.plain.store.loadRun(runId))!;
        assert.equal(loaded.steps.length, recorded.steps.length - folded + 1, runId);
        assert.equal(loaded.steps[0].agentId, SYSTEM_AGENT);
        assert.equal(loaded.steps[0].stepName, 'base');
        assert.equal(loaded.run.lastSequence, recorded.run.lastSequence, runId);
        await waypoints.plain.verify(runId);
        assert.deepEqual(plain((await waypoints.plain.checkpoint(runId)).shared_context), recorded.checkpoint.shared_context, runId);
        const again = await waypoints.plain.resume(runId);
        assert.equal(again.stepsExecuted, 0, runId);
        assert.deepEqual(plain(again.state), recorded.checkpoint.shared_context, runId);
      }
    });
  });
}
