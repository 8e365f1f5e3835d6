import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { resolve } from 'node:path';
import { Client } from 'pg';
import { ContainerModule } from 'inversify';
import { JsonLogger, TOKENS, Waypoint, postgresStorage, type RunRecord } from '../../src/index';
import {
  UNLEASED_GRACE_MS,
  enqueue,
  isOrphan,
  isStuckDelivery,
  queueNameFor,
  redispatchIdFor,
  recoverOrphans,
  startOrphanSweeper,
  startWorker,
  type OrphanAction,
  type RunJob,
} from '../../src/queue/index';
import { killLiveChildren, spawnNode, waitFor, waitForLine } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { runRecord, sleep, withCode } from '../helpers/store-records';
import { FleetEnv, FleetPipeline, fleetModule, fleetStepKeys, fleetTablesSql } from './fleet-pipeline';
import { QUEUE_BACKENDS } from './queue-backends';

const CHILD = resolve(__dirname, 'orphan-child-main.js');

/** A PostgreSQL schema with the store and the fleet tables, a Waypoint on it, and a SQL client. */
async function openStore(testName: string) {
  const schema = schemaFor(`orphans: ${testName}`);
  await dropSchema(schema);
  const db = new Client({ connectionString: PG_TEST_URL });
  await db.connect();
  await db.query(fleetTablesSql(schema));
  const env = new FleetEnv({ url: PG_TEST_URL, schema, worker: 'recoverer', stepMs: 20 });
  const quiet = new ContainerModule(({ bind }) => {
    bind(TOKENS.Logger).toConstantValue(new JsonLogger('error'));
  });
  const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema }), fleetModule(env), quiet], pipelines: [FleetPipeline], leaseTtlMs: 1_500 });
  return {
    schema,
    db,
    waypoint,
    /** Starts a child running `runId` and SIGKILLs it while its third step is running. */
    async killMidRun(runId: string, extraEnv: Record<string, string> = {}) {
      const child = spawnNode(CHILD, [runId], { FLEET_PG_URL: PG_TEST_URL, FLEET_STORE_SCHEMA: schema, FLEET_STEP_MS: '150', WAYPOINT_LOG_LEVEL: 'error', ...extraEnv });
      await waitForLine(child, /"event":"created"/, 20_000);
      await waitFor(async () => (await db.query(`SELECT 1 FROM "${schema}".fleet_step_log WHERE run_id = $1 AND step = 's3'`, [runId])).rowCount === 1, {
        what: 'the child to reach s3',
        child,
        timeoutMs: 20_000,
        intervalMs: 10,
      });
      const exit = await child.kill('SIGKILL');
      assert.equal(exit.signal, 'SIGKILL');
      const run = await waypoint.store.getRun(runId);
      assert.equal(run?.status, 'running', 'the killed run is left running');
      assert.equal(run?.lastSequence, 2);
      return run;
    },
    /** The run completed with each step recorded once, the first two by the child, the charge made once. */
    async assertRecovered(runId: string) {
      assert.equal((await waypoint.get(runId))?.status, 'completed');
      const rows = await waypoint.store.listSteps(runId);
      assert.deepEqual(
        rows.map((r) => `${r.agentId}/${r.stepName}`),
        fleetStepKeys(),
        'each step recorded once, in order',
      );
      const log = (await db.query<{ step: string; worker: string }>(`SELECT step, worker FROM "${schema}".fleet_step_log WHERE run_id = $1 ORDER BY id`, [runId])).rows;
      assert.deepEqual(
        log.slice(0, 3).map((r) => `${r.step}:${r.worker}`),
        ['s1:child', 's2:child', 's3:child'],
        'the child ran s1, s2 and was killed in s3',
      );
      assert.deepEqual(
        log.slice(3).map((r) => r.step),
        ['s3', 's4', 's5', 's6'],
        'the recovery resumed at s3, never repeating s1 or s2',
      );
      const charged = await db.query(`SELECT 1 FROM "${schema}".fleet_effects WHERE run_id = $1`, [runId]);
      assert.equal(charged.rowCount, 1, 'charged once');
    },
    async close() {
      await waypoint.close();
      await env.close();
      await db.end();
      await dropSchema(schema);
    },
  };
}

describe('orphan recovery', () => {
  after(() => killLiveChildren());

  it('a periodic sweep without a queue resumes a run whose executor vanished, once its lease expired', { timeout: 40_000 }, async () => {
    const store = await openStore('resume mode');
    try {
      // A lease owner of another host's shape: this host cannot tell it is dead, so only expiry frees it.
      const killed = await store.killMidRun('orphan-1', { FLEET_LEASE_OWNER: 'other-host:4242:gone', FLEET_LEASE_TTL_MS: '1500' });
      assert.deepEqual(await recoverOrphans(store.waypoint), [], 'not an orphan while its lease is valid');
      const sweeps: OrphanAction[][] = [];
      const sweeper = startOrphanSweeper(store.waypoint, { everyMs: 200, onSweep: (actions) => sweeps.push(actions) });
      try {
        await waitFor(async () => (await store.waypoint.get('orphan-1'))?.status === 'completed', { what: 'the sweep to finish the orphan', timeoutMs: 20_000, intervalMs: 50 });
      } finally {
        await sweeper.stop();
      }
      const resumed = sweeps.flat().filter((a) => a.runId === 'orphan-1');
      assert.deepEqual(
        resumed.map((a) => [a.action, a.status, a.leaseOwner]),
        [['resumed', 'completed', 'other-host:4242:gone']],
      );
      assert.ok(Date.now() >= killed.leaseExpiresAt!.getTime(), 'resumed only after the lease expired');
      await store.assertRecovered('orphan-1');
    } finally {
      await store.close();
    }
  });

  for (const backend of QUEUE_BACKENDS) {
    it(`on ${backend.name}: a dead holder on this host is an orphan at once; sweepers enqueue it once and a worker finishes it`, { timeout: 40_000 }, async () => {
      const store = await openStore(`enqueue mode ${backend.name}`);
      const fixture = await backend.open(`orphans: enqueue mode ${backend.name}`);
      const queue = fixture.create();
      try {
        // Default host:pid:random owner and a long lease: recovery must not wait for the lease to expire.
        await store.killMidRun('orphan-2', { FLEET_LEASE_TTL_MS: '60000' });
        const first = await recoverOrphans(store.waypoint, { queue });
        const second = await recoverOrphans(store.waypoint, { queue });
        assert.deepEqual(
          first.map((a) => [a.runId, a.action]),
          [['orphan-2', 'enqueued']],
        );
        assert.deepEqual(
          second.map((a) => [a.runId, a.action]),
          [['orphan-2', 'already-queued']],
          'a second sweeper adds no second job',
        );
        const worker = await startWorker(store.waypoint, { pipelines: [FleetPipeline], queue, pollIntervalMs: 50, signals: [], recoverOrphans: false });
        try {
          await waitFor(async () => (await store.waypoint.get('orphan-2'))?.status === 'completed', { what: 'the worker to finish the orphan', timeoutMs: 20_000, intervalMs: 50 });
        } finally {
          await worker.stop();
        }
        await store.assertRecovered('orphan-2');
        assert.deepEqual(await recoverOrphans(store.waypoint, { queue }), [], 'nothing left to recover');
      } finally {
        await fixture.dispose();
        await store.close();
      }
    });
  }

  for (const backend of QUEUE_BACKENDS) {
    it(`on ${backend.name}: a job taken by a worker that never leased its run is re-dispatched once, under a new id, and finished`, { timeout: 40_000 }, async () => {
      const store = await openStore(`stuck delivery ${backend.name}`);
      const fixture = await backend.open(`orphans: stuck delivery ${backend.name}`);
      const queue = fixture.create();
      try {
        await enqueue(store.waypoint, FleetPipeline, { runId: 'stuck-1', input: { customer: 'stuck', amount: 3 }, queue, priority: 5 });
        // A worker takes the job and dies before leasing the run: the job stays active, the run paused.
        const [taken] = await queue.fetch(queueNameFor('waypoint', 'fleet-test'), 1);
        assert.equal(taken?.job.runId, 'stuck-1');
        assert.equal((await store.waypoint.get('stuck-1'))?.status, 'paused');
        assert.deepEqual(await recoverOrphans(store.waypoint, { queue, pipelines: ['fleet-test'] }), [], 'not stuck before stuckAfterMs (default 30 s)');
        await sleep(300);
        const first = await recoverOrphans(store.waypoint, { queue, pipelines: ['fleet-test'], stuckAfterMs: 200 });
        assert.deepEqual(
          first.map((a) => [a.runId, a.action, a.stuckJobId]),
          [['stuck-1', 'redispatched', taken.id]],
        );
        const second = await recoverOrphans(store.waypoint, { queue, pipelines: ['fleet-test'], stuckAfterMs: 200 });
        assert.deepEqual(
          second.map((a) => [a.runId, a.action]),
          [['stuck-1', 'already-queued']],
          'many sweepers, one new job',
        );
        // The copy stands in for the stuck job: the same kind and epoch, and it says which job it replaces.
        const copy = await queue.find(queueNameFor('waypoint', 'fleet-test'), redispatchIdFor(taken.id));
        assert.deepEqual([copy?.kind, copy?.epoch, copy?.redispatchOf], [taken.job.kind, taken.job.epoch, taken.id]);
        assert.equal(taken.job.kind, 'enqueue');
        assert.deepEqual(await recoverOrphans(store.waypoint, { queue, stuckAfterMs: 200 }), [], 'queues are checked only for the pipelines named');
        const worker = await startWorker(store.waypoint, { pipelines: [FleetPipeline], queue, pollIntervalMs: 50, signals: [], recoverOrphans: false });
        try {
          await waitFor(async () => (await store.waypoint.get('stuck-1'))?.status === 'completed', {
            what: 'the worker to finish the re-dispatched run',
            timeoutMs: 20_000,
            intervalMs: 50,
          });
        } finally {
          await worker.stop();
        }
        assert.deepEqual(
          (await store.waypoint.store.listSteps('stuck-1')).map((r) => `${r.agentId}/${r.stepName}`),
          fleetStepKeys(),
        );
        assert.deepEqual(
          await recoverOrphans(store.waypoint, { queue, pipelines: ['fleet-test'], stuckAfterMs: 200 }),
          [],
          'the stuck job of a completed run is left to the queue',
        );
        // The stuck job itself, handed out later, finds the run completed and is completed harmlessly.
        await queue.complete(taken, { outcome: 'skipped' });
      } finally {
        await fixture.dispose();
        await store.close();
      }
    });
  }

  it('isStuckDelivery: a run that still needs its job and holds no live lease', () => {
    const now = Date.now();
    const job: RunJob = { runId: 'r', pipeline: 'p', epoch: 1, enqueuedAt: new Date(now).toISOString() };
    const run = (over: Partial<RunRecord>) => runRecord({ status: 'paused', cursorAgent: 0, createdAt: new Date(now), updatedAt: new Date(now), ...over });
    assert.equal(isStuckDelivery(run({}), job, now), true, 'paused, never leased');
    assert.equal(isStuckDelivery(run({ status: 'running', leaseOwner: 'other-host:1:x', leaseExpiresAt: new Date(now - 1) }), job, now), true, 'lease expired');
    assert.equal(isStuckDelivery(run({ status: 'running', leaseOwner: 'other-host:1:x', leaseExpiresAt: new Date(now + 5_000) }), job, now), false, 'a live executor holds it');
    assert.equal(isStuckDelivery(run({ status: 'completed' }), job, now), false, 'finished');
    assert.equal(isStuckDelivery(run({ status: 'cancelled' }), job, now), false, 'cancelled');
    assert.equal(isStuckDelivery(run({ status: 'failed', leaseEpoch: 2 }), job, now), false, 'failed under a later executor');
    assert.equal(isStuckDelivery(run({ status: 'failed', leaseEpoch: 1 }), job, now), true, "failed before an earlier release's job was sent: the job may retry it");
    assert.equal(isStuckDelivery(run({ status: 'failed', leaseEpoch: 1 }), { ...job, kind: 'retry' }, now), true, 'the user retried the failed run: the job retries it');
    for (const kind of ['wake', 'recover', 'enqueue'] as const) {
      assert.equal(isStuckDelivery(run({ status: 'failed', leaseEpoch: 1 }), { ...job, kind }, now), false, `a ${kind} job has nothing to do for a failed run`);
    }
    assert.equal(isStuckDelivery(run({ pipelineName: 'other' }), job, now), false, "another pipeline's run");
    assert.equal(isStuckDelivery(null, job, now), false, 'no such run');
  });

  it('isOrphan: expired or dead-holder leases only; an unleased run gets a grace period', () => {
    const now = Date.now();
    const run = (over: Partial<RunRecord>): RunRecord => ({
      runId: 'r',
      pipelineName: 'p',
      pipelineVersion: '1',
      status: 'running',
      cursorAgent: 0,
      cursorStep: 0,
      lastSequence: 0,
      input: '{}',
      metadata: '{}',
      leaseOwner: 'other-host:1:x',
      leaseEpoch: 1,
      leaseExpiresAt: new Date(now - 1),
      error: null,
      resumeHint: null,
      createdAt: new Date(now),
      updatedAt: new Date(now),
      ...over,
    });
    assert.equal(isOrphan(run({}), now, 0), true, 'lease expired');
    assert.equal(isOrphan(run({}), now, 5_000), false, 'expired, but not long enough ago');
    assert.equal(isOrphan(run({ leaseExpiresAt: new Date(now + 1_000) }), now, 0), false, 'live lease');
    assert.equal(isOrphan(run({ status: 'paused' }), now, 0), false, 'paused on purpose');
    assert.equal(isOrphan(run({ leaseOwner: null, leaseExpiresAt: null }), now, 0), false, 'unleased, just created');
    assert.equal(isOrphan(run({ leaseOwner: null, leaseExpiresAt: null, updatedAt: new Date(now - UNLEASED_GRACE_MS - 1) }), now, 0), true, 'unleased for too long');
  });

  it('recoverOrphans checks its options', async () => {
    const store = await openStore('options');
    try {
      await assert.rejects(recoverOrphans(store.waypoint, { olderThanMs: -1 }), withCode('INVALID_ARGUMENT'));
      await assert.rejects(recoverOrphans(store.waypoint, { mode: 'enqueue' }), withCode('QUEUE_NOT_CONFIGURED'));
      await assert.rejects(recoverOrphans(store.waypoint, { stuckAfterMs: -1 }), withCode('INVALID_ARGUMENT'));
      assert.throws(() => startOrphanSweeper(store.waypoint, { everyMs: 0 }), withCode('INVALID_ARGUMENT'));
    } finally {
      await store.close();
    }
  });
});
