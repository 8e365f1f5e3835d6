import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, describe, it, type TestContext } from 'node:test';
import { resolve } from 'node:path';
import { Client } from 'pg';
import { Waypoint, postgresStorage, type RunInfo } from '../../src/index';
import { RUN_QUEUE, enqueue, startWorker, type FleetWorker } from '../../src/queue/index';
import { killLiveChildren, spawnNode, waitFor, waitForLine, type ChildHandle } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { FleetEnv, fleetModule, fleetTablesSql } from './fleet-pipeline';
import {
  BoundedParent,
  CollectParent,
  DistState,
  DistributedParent,
  FANOUT_PIPELINES,
  FanOutItem,
  FanOutParent,
  HEALED,
  ItemAgent,
  SlowDistributedParent,
  SumAgent,
  itemsOf,
} from './fanout-pipeline';
import { Pipeline, forEach, loop } from '../../src/index';
import { itemPipelinesOf } from '../../src/core/flow/fan-out';
import { buildRunTree } from '../../src/cli/run-tree';
import { flowView, type ForEachView } from '../../src/ui/flow-view';
import { readPlan } from '../../src/core/plan/plan-reader';
import { queueFromEnv, type QueueBackend, type QueueFixture } from './queue-backends';
import { TcpProxy } from '../helpers/tcp-proxy';

const WORKER = resolve(__dirname, 'fleet-worker-main.js');
const CHILDREN = 60;

interface Scenario {
  name: string;
  fault?: string;
  armFirstOnly?: boolean;
  killMidChild?: boolean;
  defaults?: boolean;
  /** The parent distributes an agent body (`DistributedParent`) instead of a `@Pipeline` child. */
  distributed?: boolean;
}

/** One test's store schema, queue, step-log tables and a Waypoint of the test process (enqueue, reads). */
interface Setup {
  schema: string;
  queue: QueueFixture;
  db: Client;
  env: FleetEnv;
  waypoint: Waypoint;
  dispose(): Promise<void>;
}

async function setUp(backend: QueueBackend, name: string, tuning?: 'defaults'): Promise<Setup> {
  const schema = schemaFor(`fanout: ${backend.name}: ${name}`);
  await dropSchema(schema);
  const queue = await backend.open(`fanout: ${backend.name}: ${name}`, tuning ?? { expireMs: 3_000, checkMs: 1_000, retryDelayMs: 200 });
  const db = new Client({ connectionString: PG_TEST_URL });
  await db.connect();
  await db.query(fleetTablesSql(schema));
  const env = new FleetEnv({ url: PG_TEST_URL, schema, worker: 'test', stepMs: 5 });
  const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema }), queue.module(), fleetModule(env)], pipelines: FANOUT_PIPELINES });
  return {
    schema,
    queue,
    db,
    env,
    waypoint,
    async dispose() {
      await waypoint.close();
      await env.close();
      await db.end();
      await queue.dispose();
      await dropSchema(schema);
    },
  };
}

/** Per child run and step: how many executions started and how many ended (from the step log). */
async function stepCounts(s: Setup): Promise<Map<string, { started: number; ended: number }>> {
  const { rows } = await s.db.query<{ run_id: string; step: string; started: string; ended: string }>(
    `SELECT run_id, step, count(*) AS started, count(ended_at) AS ended FROM "${s.schema}".fleet_step_log GROUP BY run_id, step`,
  );
  return new Map(rows.map((r) => [`${r.run_id}|${r.step}`, { started: Number(r.started), ended: Number(r.ended) }]));
}

/** Per run and step, each execution's worker and whether its body ran to its end. */
async function stepExecutions(s: Setup): Promise<Map<string, { worker: string; ended: boolean }[]>> {
  const { rows } = await s.db.query<{ run_id: string; step: string; worker: string; ended: boolean }>(
    `SELECT run_id, step, worker, ended_at IS NOT NULL AS ended FROM "${s.schema}".fleet_step_log ORDER BY id`,
  );
  const byStep = new Map<string, { worker: string; ended: boolean }[]>();
  for (const r of rows) {
    const key = `${r.run_id}|${r.step}`;
    byStep.set(key, [...(byStep.get(key) ?? []), { worker: r.worker, ended: r.ended }]);
  }
  return byStep;
}

/** The parent's final state: a completed run returns its recorded state without running anything. */
async function finalState(s: Setup, pipeline: typeof FanOutParent, runId: string): Promise<{ results: Record<string, unknown>[]; sum?: number }> {
  const result = await s.waypoint.run<{ results: Record<string, unknown>[]; sum?: number }>(pipeline, { runId });
  assert.equal(result.status, 'completed');
  return result.state;
}

function assertInOrder(results: Record<string, unknown>[], count: number): void {
  assert.equal(results.length, count);
  results.forEach((r, i) => {
    assert.equal(r.n, i, `results[${i}] is item ${i}`);
    assert.equal(r.doubled, 2 * i);
    assert.equal(r.checked, i, `child of item ${i} saw ctx.itemIndex ${i}`);
  });
}

/**
 * The fan-out suite for one queue backend: 3 worker processes, a parent with 60 child runs, SIGKILLs at
 * each fan-out death point (and one mid-child); plus in-process fleets for collect, failure, cancel,
 * the concurrency bound and idempotent queueing.
 */
export function defineFanOutSuite(backend: QueueBackend): void {
  describe(`fan-out on ${backend.name}`, () => {
    after(() => killLiveChildren());

    const scenarios: Scenario[] = [
      { name: 'no fault' },
      { name: 'parent killed with its children half queued', fault: 'before-children-enqueued-all@20', armFirstOnly: true },
      { name: 'worker killed while a child runs', killMidChild: true },
      { name: 'worker killed after the last child ended, before waking the parent', fault: 'after-last-child-before-parent-wake' },
      { name: 'worker killed while the parent collects', fault: 'while-collecting-children' },
      // The library's timings (lease 30 s, sweep every 20 s, poll 500 ms) and the queue's own: the bound users get.
      { name: 'worker killed after the last child ended, with the default timings', fault: 'after-last-child-before-parent-wake', defaults: true },
      // `distribute: true` over an agent body: each item a hidden child run, the same death points.
      { name: 'distributed agent body: no fault', distributed: true },
      { name: 'distributed agent body: parent killed with its items half queued', fault: 'before-children-enqueued-all@20', armFirstOnly: true, distributed: true },
      { name: 'distributed agent body: worker killed while an item runs', killMidChild: true, distributed: true },
      { name: 'distributed agent body: worker killed after the last item ended, before waking the parent', fault: 'after-last-child-before-parent-wake', distributed: true },
      { name: 'distributed agent body: worker killed while the parent collects', fault: 'while-collecting-children', distributed: true },
    ];
    for (const scenario of scenarios) {
      it(
        `3 workers, ${CHILDREN} children: ${scenario.name}: every child completes once, results in item order, the parent within 60 s of its last child`,
        { timeout: 120_000 },
        async (t) => {
          const s = await setUp(backend, scenario.name, scenario.defaults ? 'defaults' : undefined);
          const ctl = { finished: false };
          try {
            await fleetScenario(t, s, scenario, ctl);
          } finally {
            ctl.finished = true;
            await killLiveChildren();
            await s.dispose();
          }
        },
      );
    }

    it('onItemError collect: failed children land in state[into] as error descriptions and the parent completes', { timeout: 60_000 }, async () => {
      const s = await setUp(backend, 'collect');
      const workers = await inProcessFleet(s, 3);
      try {
        await enqueue(s.waypoint, CollectParent, { runId: 'collect', input: { items: itemsOf(8, (i) => i === 2 || i === 5) } });
        const parent = await untilEnded(s.waypoint, 'collect');
        assert.equal(parent.status, 'completed', JSON.stringify(parent));
        const { results, sum } = await finalState(s, CollectParent, 'collect');
        assert.equal(results.length, 8);
        for (const i of [2, 5]) {
          const r = results[i];
          assert.equal(r.status, 'failed');
          assert.equal(r.itemIndex, i);
          assert.equal(r.runId, `collect/results/${i}`);
          assert.match(String((r.error as { message: string }).message), new RegExp(`item ${i} is bad`));
        }
        for (const i of [0, 1, 3, 4, 6, 7]) assert.equal(results[i].doubled, 2 * i);
        assert.equal(sum, 2 * (0 + 1 + 3 + 4 + 6 + 7));
      } finally {
        await stopAll(workers);
        await s.dispose();
      }
    });

    it('distribute: true without a fleet runs the items in the parent process, giving what the fleet gives', { timeout: 60_000 }, async () => {
      const s = await setUp(backend, 'distributed in process');
      try {
        const result = await s.waypoint.run<{ results: Record<string, unknown>[]; sum: number }>(DistributedParent, { runId: 'local', input: { items: itemsOf(5) } });
        assert.equal(result.status, 'completed');
        result.state.results.forEach((r, i) => assert.deepEqual(r, { n: i, doubled: 2 * i, seen: 5, trail: [`d${i}`, `c${i}`], checked: i }));
        assert.equal(result.state.sum, 2 * (0 + 1 + 2 + 3 + 4));
        assert.deepEqual(await s.waypoint.list({ parentRunId: 'local' }), []);
      } finally {
        await s.dispose();
      }
    });

    it(
      'a distributed parent resumed without a fleet takes the items the fleet created as its child runs: every item step runs once, results as in process',
      { timeout: 90_000 },
      async () => {
        const s = await setUp(backend, 'resumed outside the fleet');
        s.waypoint.register(SlowDistributedParent);
        const parentId = 'outside';
        const items = itemsOf(10);
        let workers: Awaited<ReturnType<typeof inProcessFleet>> = [];
        try {
          workers = await inProcessFleet(s, 2, [SlowDistributedParent]);
          await enqueue(s.waypoint, SlowDistributedParent, { runId: parentId, input: { items } });
          // The fleet stops once 3 items completed on it: with 3 open at a time, later items are running, queued or not created...
          // ...and one more is open: the first three can end together, before the parent's wake creates the next ones.
          const fleetLeftWork = async () => {
            const children = await s.waypoint.list({ parentRunId: parentId });
            return children.filter((c) => c.status === 'completed').length >= 3 && children.some((c) => c.status !== 'completed');
          };
          await waitFor(fleetLeftWork, { what: 'three items completed on the fleet and one open', timeoutMs: 30_000, intervalMs: 20 });
          await stopAll(workers);
          workers = [];
          const before = await s.waypoint.list({ parentRunId: parentId });
          const done = before.filter((c) => c.status === 'completed').length;
          assert.ok(done >= 3 && before.length < items.length, `the fleet left items to do: ${JSON.stringify(before.map((c) => [c.runId, c.status]))}`);
          assert.notEqual((await s.waypoint.get(parentId))?.status, 'completed');

          // An item still leased elsewhere (a fleet worker not yet expired) is not run here: the item fails with RUN_LOCKED.
          const open = before.find((c) => c.status !== 'completed')!;
          const held = (await s.waypoint.store.acquireLease(open.runId, 'elsewhere', 60_000))!;
          await assert.rejects(s.waypoint.resume(parentId), (error: Error & { code?: string }) => {
            assert.equal(error.code, 'ITEM_FAILED');
            assert.match(error.message, /being executed by 'elsewhere'/);
            return true;
          });
          await s.waypoint.store.releaseLease(open.runId, 'elsewhere', held.epoch);

          // This process has no fleet: the parent runs on here.
          const resumed = await s.waypoint.resume<{ results: Record<string, unknown>[]; sum: number }>(parentId);
          assert.equal(resumed.status, 'completed');
          const local = await s.waypoint.run<{ results: Record<string, unknown>[]; sum: number }>(SlowDistributedParent, { runId: 'in-process', input: { items } });
          assert.equal(local.status, 'completed');
          assert.deepEqual(resumed.state.results, local.state.results);
          resumed.state.results.forEach((r, i) => assert.deepEqual(r, { n: i, doubled: 2 * i, seen: items.length, trail: [`d${i}`, `c${i}`], checked: i }));
          assert.equal(resumed.state.sum, local.state.sum);
          // The items the fleet created ended as child runs (none failed, none left open); the others ran in this process, without one.
          const after = await s.waypoint.list({ parentRunId: parentId });
          assert.deepEqual(after.map((c) => c.runId).sort(), before.map((c) => c.runId).sort());
          assert.ok(
            after.every((c) => c.status === 'completed'),
            JSON.stringify(after.map((c) => [c.runId, c.status])),
          );

          // Exactly once across the fleet and this process: every step of every item started and ended once.
          const counts = await stepCounts(s);
          for (let i = 0; i < items.length; i++) {
            for (const step of ['double', 'check']) assert.deepEqual(counts.get(`${parentId}#${i}|${step}`), { started: 1, ended: 1 }, `item ${i} step ${step}`);
          }
          // Resumed again: a completed parent runs nothing, and its replay reads the items from both places alike.
          const again = await s.waypoint.resume<{ results: Record<string, unknown>[] }>(parentId);
          assert.equal(again.stepsExecuted, 0);
          assert.deepEqual(again.state.results, local.state.results);
          assert.deepEqual(await stepCounts(s), counts);
        } finally {
          await stopAll(workers);
          await s.dispose();
        }
      },
    );

    it('a distributed parent paused in a process without a fleet, then queued to the fleet, finishes there without running an item again', { timeout: 90_000 }, async () => {
      const s = await setUp(backend, 'in process then fleet');
      s.waypoint.register(SlowDistributedParent);
      const parentId = 'here-then-fleet';
      const items = itemsOf(10);
      let workers: Awaited<ReturnType<typeof inProcessFleet>> = [];
      try {
        // In this process (no fleet) until 3 item steps ended, then paused.
        const stop = new AbortController();
        const first = s.waypoint.run(SlowDistributedParent, { runId: parentId, input: { items }, signal: stop.signal });
        const ended = async () => [...(await stepCounts(s)).values()].filter((c) => c.ended > 0).length;
        await waitFor(async () => (await ended()) >= 3, { what: 'three item steps ended in process', timeoutMs: 30_000, intervalMs: 20 });
        stop.abort();
        assert.equal((await first).status, 'paused');
        assert.equal((await s.waypoint.list({ parentRunId: parentId })).length, 0, 'no child runs in process');

        // Queued to the fleet: it finishes the forEach in the worker's process, with no child run for the items run here.
        workers = await inProcessFleet(s, 2, [SlowDistributedParent]);
        await enqueue(s.waypoint, SlowDistributedParent, { runId: parentId, input: { items } });
        const parent = await untilEnded(s.waypoint, parentId);
        assert.equal(parent.status, 'completed');
        const local = await s.waypoint.run<{ results: Record<string, unknown>[]; sum: number }>(SlowDistributedParent, { runId: 'in-process-2', input: { items } });
        const done = await s.waypoint.resume<{ results: Record<string, unknown>[]; sum: number }>(parentId);
        assert.equal(done.stepsExecuted, 0);
        assert.deepEqual(done.state.results, local.state.results);
        const counts = await stepCounts(s);
        for (let i = 0; i < items.length; i++) {
          for (const step of ['double', 'check']) assert.deepEqual(counts.get(`${parentId}#${i}|${step}`), { started: 1, ended: 1 }, `item ${i} step ${step}`);
        }
      } finally {
        await stopAll(workers);
        await s.dispose();
      }
    });

    it('distribute: true takes an agent or a sequence of agents as its body, and names its hidden pipeline from the parent', () => {
      const define = (body: unknown) => {
        const type = class {};
        Pipeline({
          name: 'fanout-distribute-check',
          version: '1.0.0',
          state: DistState,
          agents: [forEach((st: DistState) => st.items, body as typeof ItemAgent, { into: 'results', distribute: true })],
        })(type);
        return readPlan(type);
      };
      assert.throws(() => define([ItemAgent, loop({ until: () => true }, SumAgent)]), /distributes its items \(distribute: true\), which needs an agent or a sequence of agents/);
      assert.deepEqual(
        itemPipelinesOf(readPlan(DistributedParent)).map((type) => readPlan(type).name),
        ['fanout-distributed:items:forEach_results_'],
      );
      // The hidden pipeline's steps are the body's, keyed as in a pipeline of their own.
      assert.deepEqual(
        readPlan(itemPipelinesOf(readPlan(DistributedParent))[0]).steps.map((step) => step.key),
        ['ItemAgent/double', 'ItemAgent/check'],
      );
    });

    it('a failed item of a distributed agent body fails the parent (ITEM_FAILED)', { timeout: 60_000 }, async () => {
      const s = await setUp(backend, 'distributed fail');
      const workers = await inProcessFleet(s, 2);
      try {
        await enqueue(s.waypoint, DistributedParent, { runId: 'dfail', input: { items: itemsOf(6, (i) => i === 4) } });
        const parent = await untilEnded(s.waypoint, 'dfail');
        assert.equal(parent.status, 'failed');
        assert.match(String((parent.error as { message: string }).message), /item 4 of 'forEach\(results\)' failed: .*item 4 is bad/);
      } finally {
        await stopAll(workers);
        await s.dispose();
      }
    });

    it('a failed child fails the parent (ITEM_FAILED) and no child is left open', { timeout: 60_000 }, async () => {
      const s = await setUp(backend, 'fail');
      const workers = await inProcessFleet(s, 3);
      try {
        await enqueue(s.waypoint, FanOutParent, { runId: 'fail', input: { items: itemsOf(10, (i) => i === 3) } });
        const parent = await untilEnded(s.waypoint, 'fail');
        assert.equal(parent.status, 'failed');
        assert.equal((parent.error as { code: string }).code, 'ITEM_FAILED');
        assert.match(String((parent.error as { message: string }).message), /item 3 of 'forEach\(results\)' failed: .*item 3 is bad/);
        const children = await s.waypoint.list({ parentRunId: 'fail' });
        assert.ok(
          children.every((c) => ['completed', 'failed', 'cancelled'].includes(c.status)),
          JSON.stringify(children.map((c) => [c.runId, c.status])),
        );
      } finally {
        await stopAll(workers);
        await s.dispose();
      }
    });

    it('a fleet parent failed on an item resumes once the item is retried: it reopens the items its failure closed and completes in order', { timeout: 90_000 }, async () => {
      const s = await setUp(backend, 'resume failed');
      const workers = await inProcessFleet(s, 2);
      const parentId = 'refail';
      try {
        // At most 3 children open: when item 1 fails, later items are not created yet and open ones are closed.
        // Item 2 is slow: still running when item 1 fails, so the failure closes it (cancelled, marked).
        const items = itemsOf(10, (i) => i === 1).map((item) => (item.n === 2 ? { ...item, slow: 3_000 } : item));
        await enqueue(s.waypoint, BoundedParent, { runId: parentId, input: { items } });
        const failed = await untilEnded(s.waypoint, parentId);
        assert.equal(failed.status, 'failed');
        const closed = (await s.waypoint.get(`${parentId}/results/2`))!;
        assert.equal(closed.status, 'cancelled');
        assert.match(closed.resumeHint ?? '', /\[closed with its parent\]/);
        assert.equal(await s.waypoint.get(`${parentId}/results/5`), null, 'items after the bound are not created yet');
        assert.equal((failed.error as { code: string }).code, 'ITEM_FAILED');
        assert.equal((await s.waypoint.get(`${parentId}/results/1`))?.status, 'failed');
        // The user fixes the cause and retries the failed child, then resumes the parent on the fleet.
        HEALED.add(1);
        assert.equal((await s.waypoint.resume(`${parentId}/results/1`)).status, 'completed');
        // A later look of an execution started before the retry may fail the parent again: compare with the parent as it stands now.
        const beforeResume = (await s.waypoint.get(parentId))!;
        // Queued again once the queue has settled the first job (the run row says failed a moment before BullMQ moves its job).
        await waitFor(async () => (await enqueue(s.waypoint, BoundedParent, { runId: parentId })).enqueued, {
          what: 'the failed parent queued again',
          timeoutMs: 10_000,
          intervalMs: 50,
        });
        // Ended again: completed, or failed by a later execution than the first.
        await waitFor(
          async () => {
            const now = await s.waypoint.get(parentId);
            return now?.status === 'completed' || (now?.status !== 'failed' ? false : now.updatedAt.getTime() > beforeResume.updatedAt.getTime()) || now?.status === 'cancelled';
          },
          { what: 'the resumed parent to end', timeoutMs: 50_000, intervalMs: 50 },
        );
        const parent = (await s.waypoint.get(parentId))!;
        assert.equal(parent.status, 'completed', JSON.stringify(parent));
        const children = await s.waypoint.list({ parentRunId: parentId });
        assert.equal(children.length, 10);
        assert.ok(
          children.every((c) => c.status === 'completed'),
          JSON.stringify(children.map((c) => [c.runId, c.status])),
        );
        const { results, sum } = await finalState(s, BoundedParent, parentId);
        assertInOrder(results, 10);
        assert.equal(sum, 90);
        // The failed item's first step was recorded before it failed: the retry ran only its second step again.
        const counts = await stepCounts(s);
        assert.deepEqual(counts.get(`${parentId}/results/1|double`), { started: 1, ended: 1 });
        assert.deepEqual(counts.get(`${parentId}/results/1|check`), { started: 2, ended: 1 });
      } finally {
        HEALED.delete(1);
        await stopAll(workers);
        await s.dispose();
      }
    });

    it(
      'a queue outage while the parent queues its children does not fail it: it waits, and once the queue is back every child is queued once and the parent completes',
      { timeout: 90_000 },
      async (t) => {
        const s = await setUp(backend, 'queue outage');
        // The worker reaches the queue's server through a proxy of this test's own; the store and the test's Waypoint do not.
        const proxy = await TcpProxy.start({ port: s.queue.kind === 'pg-boss' ? 5432 : 6379 });
        const queue = queueFromEnv({ ...s.queue.env, FLEET_QUEUE_URL: proxy.url(s.queue.kind === 'pg-boss' ? 'postgres' : 'redis') });
        const fetched = new Map<string, number>();
        const fetch = queue.fetch.bind(queue);
        let cut = false;
        queue.fetch = async (name, limit) => {
          const deliveries = await fetch(name, limit);
          for (const delivery of deliveries) {
            fetched.set(delivery.job.runId, (fetched.get(delivery.job.runId) ?? 0) + 1);
            // The queue goes down the moment the worker takes the parent: the parent's sends of its children fail.
            if (delivery.job.runId === 'outage' && !cut) {
              cut = true;
              proxy.cut();
            }
          }
          return deliveries;
        };
        const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema: s.schema }), fleetModule(s.env)], leaseTtlMs: 2_000 });
        waypoint.container.bind(RUN_QUEUE).toConstantValue(queue);
        const worker = await startWorker(waypoint, {
          pipelines: FANOUT_PIPELINES,
          concurrency: 4,
          pollIntervalMs: 50,
          lockedRetryMaxMs: 3_000,
          signals: [],
          recoverOrphans: { everyMs: 1_000 },
        });
        try {
          await enqueue(s.waypoint, FanOutParent, { runId: 'outage', input: { items: itemsOf(20) } });
          await waitFor(async () => (await s.waypoint.get('outage'))?.status === 'waiting', { what: 'the parent to wait', timeoutMs: 30_000, intervalMs: 50 });
          assert.ok(cut, 'the queue was cut while the parent ran');
          assert.match((await s.waypoint.get('outage'))!.resumeHint ?? '', /\[fan-out: queueing interrupted\]/);
          // Down for a while: the parent stays waiting (never failed), its children queued or not created yet.
          await new Promise((resolve) => setTimeout(resolve, 3_000));
          assert.equal((await s.waypoint.get('outage'))?.status, 'waiting');
          const before = await s.waypoint.list({ parentRunId: 'outage' });
          assert.ok(
            before.every((c) => c.status === 'paused'),
            JSON.stringify(before.map((c) => [c.runId, c.status])),
          );
          const restoredAt = Date.now();
          proxy.restore();
          const parent = await untilEnded(s.waypoint, 'outage');
          assert.equal(parent.status, 'completed', JSON.stringify(parent));
          t.diagnostic(
            `${backend.name}: parent completed ${parent.updatedAt.getTime() - restoredAt} ms after the queue came back (${before.length} children created during the outage)`,
          );
          const { results, sum } = await finalState(s, FanOutParent, 'outage');
          assertInOrder(results, 20);
          assert.equal(sum, 20 * 19);
          // Every child queued once: one delivery each, each step run once.
          const counts = await stepCounts(s);
          for (let i = 0; i < 20; i++) {
            assert.equal(fetched.get(`outage/results/${i}`), 1, `child ${i} was delivered once`);
            for (const step of ['double', 'check']) assert.deepEqual(counts.get(`outage/results/${i}|${step}`), { started: 1, ended: 1 });
          }
        } finally {
          proxy.restore();
          await worker.stop();
          await waypoint.close();
          await queue.close();
          await proxy.close();
          await s.dispose();
        }
      },
    );

    it('concurrency bounds the open children across the fleet: never more than 3 run at once, results in order', { timeout: 90_000 }, async () => {
      const s = await setUp(backend, 'bounded');
      const workers = await inProcessFleet(s, 3);
      try {
        await enqueue(s.waypoint, BoundedParent, { runId: 'bounded', input: { items: itemsOf(12) } });
        assert.equal((await untilEnded(s.waypoint, 'bounded')).status, 'completed');
        assertInOrder((await finalState(s, BoundedParent, 'bounded')).results, 12);
        // Each child's span: its first step's start to its last step's end (database clock).
        const { rows } = await s.db.query<{ run_id: string; first: Date; last: Date }>(
          `SELECT run_id, min(started_at) AS first, max(ended_at) AS last FROM "${s.schema}".fleet_step_log GROUP BY run_id`,
        );
        assert.equal(rows.length, 12);
        const events = rows.flatMap((r) => [
          { at: r.first.getTime(), delta: 1 },
          { at: r.last.getTime(), delta: -1 },
        ]);
        events.sort((a, b) => a.at - b.at || a.delta - b.delta);
        let open = 0;
        let peak = 0;
        for (const e of events) peak = Math.max(peak, (open += e.delta));
        assert.ok(peak <= 3, `at most 3 children at once, saw ${peak}`);
      } finally {
        await stopAll(workers);
        await s.dispose();
      }
    });

    it('queueing is idempotent per child run id, and cancelling the parent cancels its queued children', { timeout: 60_000 }, async () => {
      const s = await setUp(backend, 'cancel');
      // Workers for the parent only: its children stay queued.
      const workers = await inProcessFleet(s, 1, [FanOutParent]);
      try {
        await enqueue(s.waypoint, FanOutParent, { runId: 'cancel', input: { items: itemsOf(10) } });
        await waitFor(async () => (await s.waypoint.get('cancel'))?.status === 'waiting', { what: 'the parent to wait for its children', timeoutMs: 30_000, intervalMs: 50 });
        let children = await s.waypoint.list({ parentRunId: 'cancel' });
        assert.equal(children.length, 10);
        assert.ok(children.every((c) => c.status === 'paused'));
        // No worker takes them: `runs show` and the timeline count them queued, not running.
        const loaded = (await s.waypoint.store.loadRun('cancel'))!;
        const records = await s.waypoint.store.listRuns({ parentRunId: 'cancel' });
        const tree = buildRunTree(loaded.run, loaded.steps, [], records, readPlan(FanOutParent));
        const node = tree.nodes.find((n) => n.kind === 'forEach');
        assert.deepEqual(node?.kind === 'forEach' ? node.counts : null, { completed: 0, skipped: 0, failed: 0, running: 0, queued: 10, pending: 0 });
        const view = flowView(loaded.run, loaded.steps, readPlan(FanOutParent), records).root.find((n): n is ForEachView => n.kind === 'forEach');
        assert.deepEqual(view?.counts, { completed: 0, skipped: 0, started: 0, queued: 10, failed: 0, notRecorded: 0 });
        // The same child queued again: its job exists, no second one.
        const again = await enqueue(s.waypoint, FanOutItem, { runId: 'cancel/results/0' });
        assert.equal(again.enqueued, false);
        // The parent executed again (its epoch moved, so this is a new job): it finds its children and queues none twice.
        const parentInfo = (await s.waypoint.get('cancel'))!;
        assert.ok(parentInfo.resumeHint?.includes('[fan-out]'), parentInfo.resumeHint ?? '');
        assert.equal((await enqueue(s.waypoint, FanOutParent, { runId: 'cancel' })).enqueued, true);
        await waitFor(() => workers[0].worker.stats.completed >= 2, { what: 'the parent to be executed a second time', timeoutMs: 30_000, intervalMs: 50 });
        assert.equal((await s.waypoint.list({ parentRunId: 'cancel' })).length, 10);
        assert.equal((await enqueue(s.waypoint, FanOutItem, { runId: 'cancel/results/9' })).enqueued, false);

        await s.waypoint.cancel('cancel');
        children = await s.waypoint.list({ parentRunId: 'cancel' });
        assert.deepEqual(
          children.map((c) => c.status),
          children.map(() => 'cancelled'),
        );
      } finally {
        await stopAll(workers);
        await s.dispose();
      }
    });
  });

  /** `ctl.finished` is set when the test ends (pass or fail): workers killed then are not replaced. */
  async function fleetScenario(t: TestContext, s: Setup, scenario: Scenario, ctl: { finished: boolean }): Promise<void> {
    const started = Date.now();
    const parentId = 'parent';
    const Parent = scenario.distributed ? DistributedParent : FanOutParent;
    await enqueue(s.waypoint, Parent, { runId: parentId, input: { items: itemsOf(CHILDREN) } });
    const workers: ChildHandle[] = [];
    const deaths: string[] = [];
    const killedByTest = new Set<ChildHandle>();
    /** Worker ids that were SIGKILLed (by the test, or at their own fault point). */
    const killedIds = new Set<string>();
    let count = 0;
    const spawnWorker = (fault?: string): ChildHandle => {
      const id = `w${++count}${fault ? '-armed' : ''}`;
      const child = spawnNode(WORKER, [], {
        ...s.queue.env,
        FLEET_PIPELINES: 'fanout',
        FLEET_PG_URL: PG_TEST_URL,
        FLEET_STORE_SCHEMA: s.schema,
        FLEET_WORKER_ID: id,
        FLEET_CONCURRENCY: '8',
        FLEET_STEP_MS: '5',
        FLEET_LEASE_TTL_MS: '2000',
        FLEET_POLL_MS: '100',
        FLEET_SWEEP_MS: '1000',
        FLEET_STUCK_MS: '2000',
        FLEET_DEFAULTS: scenario.defaults ? '1' : undefined,
        WAYPOINT_FAULT: fault,
        WAYPOINT_LOG_LEVEL: 'error',
      });
      workers.push(child);
      // A worker that killed itself at its fault point is replaced by one without the fault.
      void child.exited.then((exit) => {
        if (exit.signal === 'SIGKILL' && !killedByTest.has(child) && !ctl.finished) {
          killedIds.add(id);
          deaths.push(`${id} at ${Date.now() - started} ms`);
          spawnWorker();
        }
      });
      return child;
    };
    if (scenario.armFirstOnly) {
      // The armed worker alone takes the parent; the others start once it has.
      const first = spawnWorker(scenario.fault);
      await waitForLine(first, /"event":"fetched".*"runId":"parent"/, 30_000);
      spawnWorker();
      spawnWorker();
    } else {
      for (let i = 0; i < 3; i++) spawnWorker(scenario.fault);
    }
    if (scenario.killMidChild) {
      const victim = workers[1];
      await waitFor(
        async () =>
          Number(
            (await s.db.query<{ count: string }>(`SELECT count(*) FROM "${s.schema}".fleet_step_log WHERE worker = 'w2' AND ended_at IS NULL AND run_id LIKE 'parent/%'`)).rows[0]
              .count,
          ) > 0,
        { what: 'w2 to be mid-child', timeoutMs: 40_000, intervalMs: 10 },
      );
      killedByTest.add(victim);
      killedIds.add('w2');
      await victim.kill('SIGKILL');
      deaths.push(`w2 (SIGKILL mid-child) at ${Date.now() - started} ms`);
      spawnWorker();
    }
    await waitFor(async () => ['completed', 'failed', 'cancelled'].includes((await s.waypoint.get(parentId))?.status ?? ''), {
      what: 'the parent to end',
      timeoutMs: 100_000,
      intervalMs: 100,
    });
    const parent = (await s.waypoint.get(parentId))!;
    assert.equal(parent.status, 'completed', JSON.stringify(parent));
    const parentLines = () =>
      workers
        .flatMap((w) => w.stdout().split('\n'))
        .filter((l) => l.includes('"runId":"parent"'))
        .join('\n');
    if (scenario.fault) assert.ok(deaths.length >= 1, `a worker died at ${scenario.fault}; the parent's deliveries:\n${parentLines()}`);

    const children = await s.waypoint.list({ parentRunId: parentId });
    assert.equal(children.length, CHILDREN);
    assert.ok(children.every((c) => c.status === 'completed'));
    const { results, sum } = await finalState(s, Parent, parentId);
    assertInOrder(results, CHILDREN);
    assert.equal(sum, CHILDREN * (CHILDREN - 1));
    if (scenario.distributed) {
      // What the in-process forEach gives: the item's merged outputs (the reducer's list in step order), the parent's state seen.
      results.forEach((r, i) => assert.deepEqual(r, { n: i, doubled: 2 * i, seen: CHILDREN, trail: [`d${i}`, `c${i}`], checked: i }));
      // Hidden from lists unless asked; shown under their parent.
      const listed = await s.waypoint.list();
      assert.deepEqual(
        listed.map((r) => r.runId),
        [parentId],
      );
      assert.equal((await s.waypoint.list({ includeItems: true })).length, CHILDREN + 1);
      assert.equal((await s.waypoint.get(`${parentId}/results/7`))?.pipeline, 'fanout-distributed:items:forEach_results_');
    }

    // Once per step, but for what a kill interrupted: a step a killed worker was running (its body unfinished,
    // or finished and its row not yet committed) runs again elsewhere; no live worker ever ran a step twice.
    const executions = await stepExecutions(s);
    for (let i = 0; i < CHILDREN; i++) {
      for (const step of ['double', 'check']) {
        const execs = executions.get(`${parentId}/results/${i}|${step}`) ?? [];
        const what = `child ${i} step ${step}: ${JSON.stringify(execs)}, killed: ${[...killedIds].join(', ') || 'none'}`;
        const finished = execs.filter((e) => e.ended);
        assert.ok(
          execs.filter((e) => !e.ended).every((e) => killedIds.has(e.worker)),
          `only a killed worker left a step unfinished: ${what}`,
        );
        assert.ok(finished.length === 1 || (finished.length === 2 && finished.some((e) => killedIds.has(e.worker))), `ended once (twice only across a kill): ${what}`);
        // A step ran again only after a killed worker's try: every try but the last is a killed worker's.
        assert.ok(execs.length >= 1 && execs.slice(0, -1).every((e) => killedIds.has(e.worker)), `ran again only after a kill: ${what}`);
        // Killed mid-child, or killed in the parent while queueing (the armed worker takes up to 8 runs, so it may be
        // running the children it queued first), a child's step may run twice; at the other points every child had ended.
        if (!scenario.killMidChild && !scenario.armFirstOnly) assert.equal(execs.length, 1, `ran once: ${what}`);
      }
    }
    const lastChild = Math.max(...children.map((c) => c.updatedAt.getTime()));
    const wake = parent.updatedAt.getTime() - lastChild;
    t.diagnostic(`${backend.name}: parent completed ${wake} ms after its last child; deaths: ${deaths.join(', ') || 'none'}; total ${Date.now() - started} ms`);
    assert.ok(wake < 60_000, `parent completed ${wake} ms after its last child`);
  }

  async function inProcessFleet(s: Setup, count: number, pipelines: (typeof FanOutParent)[] = FANOUT_PIPELINES): Promise<{ worker: FleetWorker; waypoint: Waypoint }[]> {
    const fleet: { worker: FleetWorker; waypoint: Waypoint }[] = [];
    for (let i = 0; i < count; i++) {
      const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema: s.schema }), s.queue.module(), fleetModule(s.env)], leaseTtlMs: 2_000 });
      const worker = await startWorker(waypoint, { pipelines, concurrency: 4, pollIntervalMs: 50, lockedRetryMaxMs: 3_000, signals: [], recoverOrphans: { everyMs: 1_000 } });
      fleet.push({ worker, waypoint });
    }
    return fleet;
  }
}

async function untilEnded(waypoint: Waypoint, runId: string): Promise<RunInfo> {
  await waitFor(async () => ['completed', 'failed', 'cancelled'].includes((await waypoint.get(runId))?.status ?? ''), {
    what: `run ${runId} to end`,
    timeoutMs: 50_000,
    intervalMs: 50,
  });
  return (await waypoint.get(runId))!;
}

async function stopAll(fleet: { worker: FleetWorker; waypoint: Waypoint }[]): Promise<void> {
  for (const { worker, waypoint } of fleet) {
    await worker.stop();
    await waypoint.close();
  }
}
