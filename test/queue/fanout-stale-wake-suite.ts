import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { inject, injectable } from 'inversify';
import { Client } from 'pg';
import { Agent, Pipeline, Step, Waypoint, forEach, postgresStorage, type StepContext } from '../../src/index';
import { TOKENS } from '../../src/contract/tokens';
import { RUN_QUEUE, enqueue, jobIdFor, type EnqueueResult, queueNameFor, startWorker, type FleetWorker, type RunJob } from '../../src/queue/index';
import { wakeParent } from '../../src/queue/run-dispatch';
import { waitFor } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { FLEET_ENV, FleetEnv, fleetModule, fleetTablesSql } from './fleet-pipeline';
import { FanOutItem, ParentState, itemsOf } from './fanout-pipeline';
import type { QueueBackend, QueueFixture } from './queue-backends';

/**
 * What the failing step of {@link FailAfterParent} does before it fails: `hook` (set by a test) runs inside
 * the parent's execution, while the run is `running` under its lease; `healed` runs do not fail.
 */
export const FAILING = {
  hook: null as ((ctx: StepContext<ParentState>) => Promise<void>) | null,
  healed: new Set<string>(),
};

/** The parent's own step after its fan-out: fails (unless healed), after running `FAILING.hook`. */
@injectable()
export class FailAfterAgent extends Agent {
  constructor(@inject(FLEET_ENV) private readonly env: FleetEnv) {
    super();
  }

  @Step()
  async settle(ctx: StepContext<ParentState>) {
    return this.env.step(ctx, async () => {
      await FAILING.hook?.(ctx);
      if (!FAILING.healed.has(ctx.runId)) throw new Error(`parent ${ctx.runId} failed on its own step`);
      return { sum: (ctx.state.results ?? []).length };
    });
  }
}

/** Fans out one child per item over the fleet, then fails on its own step (the parent). */
@Pipeline({
  name: 'fanout-fail-after',
  version: '1.0.0',
  state: ParentState,
  agents: [forEach((s: ParentState) => s.items, FanOutItem, { into: 'results', concurrency: 1000 }), FailAfterAgent],
})
export class FailAfterParent {}

const PIPELINES = [FailAfterParent, FanOutItem];

interface Setup {
  schema: string;
  queue: QueueFixture;
  db: Client;
  env: FleetEnv;
  waypoint: Waypoint;
  fleet: { worker: FleetWorker; waypoint: Waypoint }[];
  dispose(): Promise<void>;
}

async function setUp(backend: QueueBackend, name: string, workers: number): Promise<Setup> {
  const schema = schemaFor(`stale wake: ${backend.name}: ${name}`);
  await dropSchema(schema);
  const queue = await backend.open(`stale wake: ${backend.name}: ${name}`, { expireMs: 3_000, checkMs: 1_000, retryDelayMs: 200 });
  const db = new Client({ connectionString: PG_TEST_URL });
  await db.connect();
  await db.query(fleetTablesSql(schema));
  const env = new FleetEnv({ url: PG_TEST_URL, schema, worker: 'test', stepMs: 5 });
  const modules = () => [postgresStorage({ url: PG_TEST_URL, schema }), queue.module(), fleetModule(env)];
  const waypoint = await Waypoint.create({ modules: modules(), pipelines: PIPELINES, leaseTtlMs: 2_000 });
  const fleet: Setup['fleet'] = [];
  for (let i = 0; i < workers; i++) {
    const member = await Waypoint.create({ modules: modules(), leaseTtlMs: 2_000 });
    const worker = await startWorker(member, {
      pipelines: PIPELINES,
      concurrency: 8,
      pollIntervalMs: 50,
      lockedRetryMaxMs: 3_000,
      signals: [],
      recoverOrphans: { everyMs: 1_000 },
    });
    fleet.push({ worker, waypoint: member });
  }
  return {
    schema,
    queue,
    db,
    env,
    waypoint,
    fleet,
    async dispose() {
      for (const { worker, waypoint: member } of fleet) {
        await worker.stop();
        await member.close();
      }
      await waypoint.close();
      await env.close();
      await db.end();
      await queue.dispose();
      await dropSchema(schema);
    },
  };
}

/** Executions of the parent's failing step, per parent run (from the step log: one row per execution). */
async function settleAttempts(s: Setup): Promise<Map<string, number>> {
  const { rows } = await s.db.query<{ run_id: string; n: string }>(`SELECT run_id, count(*) AS n FROM "${s.schema}".fleet_step_log WHERE step = 'settle' GROUP BY run_id`);
  return new Map(rows.map((r) => [r.run_id, Number(r.n)]));
}

/** Executions of each child step that ran more than once (none expected: no worker dies here). */
async function repeatedChildSteps(s: Setup): Promise<string[]> {
  const { rows } = await s.db.query<{ run_id: string; step: string; n: string }>(
    `SELECT run_id, step, count(*) AS n FROM "${s.schema}".fleet_step_log WHERE step <> 'settle' GROUP BY run_id, step HAVING count(*) > 1`,
  );
  return rows.map((r) => `${r.run_id} ${r.step} x${r.n}`);
}

/** Until both queues of the test (parents and children) hold no queued, delayed or active job. */
async function untilQueuesDrained(s: Setup, timeoutMs: number): Promise<void> {
  const queue = s.waypoint.container.get(RUN_QUEUE);
  const names = PIPELINES.map((p) => queueNameFor('waypoint', p === FailAfterParent ? 'fanout-fail-after' : 'fanout-item'));
  await waitFor(
    async () => {
      for (const name of names) {
        const counts = await queue.counts(name);
        if (counts.queued + counts.active > 0) return false;
      }
      return true;
    },
    { what: 'the queues to drain', timeoutMs, intervalMs: 100 },
  );
}

/**
 * A second enqueue of a failed run is the same retry (not queued again) while the run is still `failed`. A
 * worker may take the retry first (BullMQ delivers within milliseconds): the run is then `running` or done,
 * and the enqueue is an ordinary one, whose job settles unrun; "each retry ran the step once" checks that.
 * True when the run was still failed, so the claim was checked.
 */
function assertSameRetry(again: EnqueueResult, runId: string): boolean {
  if (again.status !== 'failed') return false;
  assert.equal(again.enqueued, false, `${runId}: a second enqueue of the same failure is the same retry`);
  return true;
}

interface Injected {
  /** The parent's lease epoch during the failing execution. */
  epoch: number;
  /**
   * Jobs of the parent's queue, queued or active, once the wake-up was sent: the job of this execution, the
   * wake-up (queued, or handed to a worker that finds the parent locked), and any a child's worker sent alike.
   */
  jobs: number;
}

/**
 * The race of the issue, made certain: while the parent's failing step runs (the parent `running` at epoch
 * E under its lease), the wake-up a child's worker sends after ending (`wakeParent`, the worker's own code)
 * is queued at epoch E; the step then fails, and the wake-up is delivered after the failure. With `legacy`,
 * a wake-up exactly as the release before job kinds sent it (no kind, the enqueue's job id) is queued too:
 * a job an upgrade finds in its queue.
 */
function injectLateWake(s: Setup, injected: Map<string, Injected>, legacy: (runId: string) => boolean): void {
  const queue = s.waypoint.container.get(RUN_QUEUE);
  const logger = s.waypoint.container.get(TOKENS.Logger);
  FAILING.hook = async (ctx) => {
    if (injected.has(ctx.runId)) return; // once per parent: the question is whether the step runs again
    const parent = (await s.waypoint.store.getRun(ctx.runId))!;
    assert.equal(parent.status, 'running');
    const child = await s.waypoint.store.getRun(`${ctx.runId}/results/0`);
    // False when a child's worker already sent this wake-up on its own (the race happened by itself).
    await wakeParent({ waypoint: s.waypoint, fleet: { queue, queueName: 'waypoint' }, logger }, child, true);
    const name = queueNameFor('waypoint', parent.pipelineName);
    if (legacy(ctx.runId)) {
      const old: RunJob = { runId: parent.runId, pipeline: parent.pipelineName, epoch: parent.leaseEpoch, enqueuedAt: new Date().toISOString(), wake: true };
      await queue.send(name, old, { id: jobIdFor(name, parent.runId, parent.leaseEpoch, parent.createdAt) });
    }
    const counts = await queue.counts(name);
    injected.set(ctx.runId, { epoch: parent.leaseEpoch, jobs: counts.queued + counts.active });
  };
}

/**
 * Issue 34, item 1: a fleet parent's failed step must not run again unless the user retries it. One
 * deterministic reproduction, and a stress run of many parents on the queue given.
 */
export function defineStaleWakeSuite(backend: QueueBackend, parents: number): void {
  describe(`stale wake-ups on ${backend.name}`, () => {
    it("a child's wake-up sent while the parent's step was failing settles unrun after the failure; the user's retry runs it once", { timeout: 90_000 }, async () => {
      const s = await setUp(backend, 'one', 3);
      const injected = new Map<string, Injected>();
      try {
        injectLateWake(s, injected, () => false);
        await enqueue(s.waypoint, FailAfterParent, { runId: 'p', input: { items: itemsOf(12) } });
        await waitFor(async () => (await s.waypoint.get('p'))?.status === 'failed', { what: 'the parent to fail', timeoutMs: 60_000, intervalMs: 50 });
        assert.ok(injected.get('p')!.jobs >= 2, "a child's wake-up was queued during the failing execution");
        await untilQueuesDrained(s, 30_000);
        const failed = (await s.waypoint.store.getRun('p'))!;
        assert.equal(failed.status, 'failed');
        assert.equal((await settleAttempts(s)).get('p'), 1, 'the failed step ran once: nobody retried it');
        assert.equal(failed.leaseEpoch, injected.get('p')!.epoch, 'the wake-up did not take the lease');

        // The user fixes the cause and retries: the parent resumes once, from its failed step.
        FAILING.healed.add('p');
        const retry = await enqueue(s.waypoint, FailAfterParent, { runId: 'p' });
        assert.equal(retry.enqueued, true, "the user's retry is queued, not taken for the kept wake-up");
        assertSameRetry(await enqueue(s.waypoint, FailAfterParent, { runId: 'p' }), 'p');
        await waitFor(async () => (await s.waypoint.get('p'))?.status === 'completed', { what: 'the retried parent to complete', timeoutMs: 30_000, intervalMs: 50 });
        await untilQueuesDrained(s, 30_000);
        assert.equal((await settleAttempts(s)).get('p'), 2, 'one failed execution, one retry');
        assert.deepEqual(await repeatedChildSteps(s), []);
      } finally {
        FAILING.hook = null;
        FAILING.healed.clear();
        await s.dispose();
      }
    });

    it(
      `${parents} parents, each failing with a late wake-up queued (half also an earlier release's): 0 unrequested re-executions, each retry runs once`,
      { timeout: 150_000 },
      async (t) => {
        const s = await setUp(backend, 'stress', 3);
        const injected = new Map<string, Injected>();
        const ids = Array.from({ length: parents }, (_, i) => `s${i}`);
        const started = Date.now();
        try {
          injectLateWake(s, injected, (runId) => Number(runId.slice(1)) % 2 === 1);
          for (const runId of ids) await enqueue(s.waypoint, FailAfterParent, { runId, input: { items: itemsOf(3) } });
          const ended = async () => (await s.waypoint.store.listRuns({ pipelineName: 'fanout-fail-after', status: 'failed', limit: 1000 })).length === parents;
          await waitFor(ended, { what: `all ${parents} parents to fail`, timeoutMs: 100_000, intervalMs: 200 });
          await untilQueuesDrained(s, 30_000);
          const failedAt = Date.now();
          let attempts = await settleAttempts(s);
          const rerun = ids.filter((id) => attempts.get(id) !== 1).map((id) => `${id} x${attempts.get(id) ?? 0}`);
          assert.deepEqual(rerun, [], 'no failed step ran again without a retry');
          for (const id of ids) {
            const run = (await s.waypoint.store.getRun(id))!;
            assert.equal(run.status, 'failed', id);
            assert.equal(run.leaseEpoch, injected.get(id)?.epoch, `${id}: no stale wake-up took the lease`);
          }

          for (const id of ids) FAILING.healed.add(id);
          let stillFailed = 0;
          for (const id of ids) {
            assert.equal((await enqueue(s.waypoint, FailAfterParent, { runId: id })).enqueued, true, `${id}: retry queued`);
            if (assertSameRetry(await enqueue(s.waypoint, FailAfterParent, { runId: id }), id)) stillFailed++;
          }
          t.diagnostic(`${backend.name}: ${stillFailed} of ${parents} second enqueues found the run still failed (the same retry); the rest found it taken by a worker`);
          const completed = async () => (await s.waypoint.store.listRuns({ pipelineName: 'fanout-fail-after', status: 'completed', limit: 1000 })).length === parents;
          await waitFor(completed, { what: `all ${parents} retried parents to complete`, timeoutMs: 100_000, intervalMs: 200 });
          await untilQueuesDrained(s, 30_000);
          attempts = await settleAttempts(s);
          assert.deepEqual(
            ids.filter((id) => attempts.get(id) !== 2).map((id) => `${id} x${attempts.get(id) ?? 0}`),
            [],
            'each retry ran the step once',
          );
          assert.deepEqual(await repeatedChildSteps(s), []);
          t.diagnostic(`${backend.name}: ${parents} parents failed in ${failedAt - started} ms, retried in ${Date.now() - failedAt} ms`);
        } finally {
          FAILING.hook = null;
          FAILING.healed.clear();
          await s.dispose();
        }
      },
    );
  });
}
