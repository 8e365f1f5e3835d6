import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { IsInt, Min } from 'class-validator';
import { ContainerModule } from 'inversify';
import { Agent, JsonLogger, NonRetryableError, Pipeline, Step, TOKENS, Waypoint, memoryStorage, type StepContext } from '../../src/index';
import { enqueue, queueNameFor, startWorker, type FleetWorker, type RunQueue, type WorkerOptions } from '../../src/queue/index';
import { waitFor } from '../helpers/child-process';
import { sleep, withCode } from '../helpers/store-records';
import type { QueueBackend, QueueFixture } from './queue-backends';

/** Expected failures (a failing step, a locked run) are logged at warn; keep test output for real errors. */
function quietLogger(): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.Logger).toConstantValue(new JsonLogger('error'));
  });
}

/** What the in-process pipelines did, reset per test. */
const probe = { calls: new Map<string, number>(), running: new Map<string, number>(), peak: new Map<string, number>(), failNext: false, holdMs: 15 };

function resetProbe(): void {
  probe.calls.clear();
  probe.running.clear();
  probe.peak.clear();
  probe.failNext = false;
  probe.holdMs = 15;
}

/** Counts a step call, and the concurrency of each `tracks` key while it runs. */
async function tracked(tracks: string[], ctx: StepContext): Promise<void> {
  const call = `${ctx.runId}/${ctx.stepName}`;
  probe.calls.set(call, (probe.calls.get(call) ?? 0) + 1);
  for (const track of tracks) {
    const now = (probe.running.get(track) ?? 0) + 1;
    probe.running.set(track, now);
    probe.peak.set(track, Math.max(probe.peak.get(track) ?? 0, now));
  }
  try {
    await sleep(probe.holdMs);
  } finally {
    for (const track of tracks) probe.running.set(track, (probe.running.get(track) ?? 1) - 1);
  }
}

class Order {
  @IsInt()
  @Min(1)
  qty!: number;
}

class OrderAgent extends Agent {
  @Step() async reserve(ctx: StepContext<Order>) {
    await tracked(['orders', 'all'], ctx);
    return { reserved: ctx.state.qty };
  }
  @Step() async ship(ctx: StepContext<Order>) {
    await tracked(['orders', 'all'], ctx);
    return { shipped: true };
  }
}

@Pipeline({ name: 'orders', version: '1.0.0', state: Order, agents: [OrderAgent] })
class Orders {}

class ReportAgent extends Agent {
  @Step() async draft(ctx: StepContext) {
    await tracked(['reports', 'all'], ctx);
    if (probe.failNext) throw new NonRetryableError('the report source is gone');
    return { drafted: true };
  }
}

@Pipeline({ name: 'reports', version: '1.0.0', agents: [ReportAgent] })
class Reports {}

/**
 * The worker in-process against each queue binding (memory store, real queue): enqueue semantics,
 * concurrency limits, a run locked by another executor, a graceful stop, a failed run.
 */
export function defineWorkerSuite(backend: QueueBackend): void {
  describe(`fleet worker on ${backend.name}`, () => {
    let fixture: QueueFixture;
    let queue: RunQueue;
    let waypoint: Waypoint;
    const workers: FleetWorker[] = [];

    beforeEach(async (t) => {
      resetProbe();
      fixture = await backend.open(`worker suite: ${t.name}`);
      queue = fixture.create();
      waypoint = await Waypoint.create({ modules: [memoryStorage(), quietLogger()], leaseTtlMs: 1_500 });
    });
    afterEach(async () => {
      await Promise.all(workers.splice(0).map((w) => w.stop()));
      await waypoint.close();
      await fixture.dispose();
    });

    const start = async (options: Partial<WorkerOptions> = {}) => {
      const worker = await startWorker(waypoint, { pipelines: [Orders, Reports], queue, pollIntervalMs: 50, signals: [], recoverOrphans: false, ...options });
      workers.push(worker);
      return worker;
    };
    const status = async (runId: string) => (await waypoint.get(runId))?.status;

    it('enqueue creates the run record at once, shown as queued, and is idempotent', async () => {
      const first = await enqueue(waypoint, Orders, { runId: 'o1', input: { qty: 2 }, queue });
      assert.deepEqual(
        { ...first, jobId: typeof first.jobId },
        { runId: 'o1', queue: queueNameFor('waypoint', 'orders'), jobId: 'string', enqueued: true, created: true, status: 'paused' },
      );
      const info = await waypoint.get('o1');
      assert.equal(info?.status, 'paused');
      assert.match(info?.resumeHint ?? '', /^Queued on 'waypoint\.orders'/);
      const again = await enqueue(waypoint, Orders, { runId: 'o1', input: { qty: 2 }, queue });
      assert.deepEqual([again.enqueued, again.created, again.jobId], [false, false, first.jobId]);
      const bare = await enqueue(waypoint, Orders, { runId: 'o1', queue });
      assert.equal(bare.enqueued, false, 'no input on an existing run: the same job');
      assert.deepEqual(await queue.counts(first.queue), { queued: 1, active: 0 });
      await assert.rejects(enqueue(waypoint, Orders, { runId: 'o1', input: { qty: 3 }, queue }), withCode('INPUT_MISMATCH'));
      await assert.rejects(enqueue(waypoint, Reports, { runId: 'o1', queue }), withCode('PIPELINE_MISMATCH'));
    });

    it('enqueue refuses bad requests before anything is stored or queued', async () => {
      await assert.rejects(enqueue(waypoint, Orders, { runId: 'bad', input: { qty: 0 }, queue }), (err: unknown) => {
        withCode('INVALID_STATE')(err);
        assert.match((err as Error).message, /qty/);
        return true;
      });
      await assert.rejects(enqueue(waypoint, Orders, { runId: 'no-input', queue }), withCode('INVALID_STATE'));
      await assert.rejects(enqueue(waypoint, Orders, { runId: 'p', input: { qty: 1 }, priority: 1.5, queue }), withCode('INVALID_ARGUMENT'));
      await assert.rejects(enqueue(waypoint, Orders, { runId: '', input: { qty: 1 }, queue }), withCode('INVALID_RUN_ID'));
      await assert.rejects(enqueue(waypoint, Orders, { runId: 'g', input: { qty: 1 }, group: '', queue }), withCode('INVALID_ARGUMENT'));
      await assert.rejects(enqueue(waypoint, Orders, { runId: 'nq', input: { qty: 1 } }), withCode('QUEUE_NOT_CONFIGURED'));
      assert.deepEqual(await waypoint.list(), [], 'no run stored');
      assert.deepEqual(await queue.counts(queueNameFor('waypoint', 'orders')), { queued: 0, active: 0 }, 'no job sent');
    });

    it('workers complete queued runs within the global and per-pipeline limits', async () => {
      for (let i = 0; i < 6; i++) await enqueue(waypoint, Orders, { runId: `o${i}`, input: { qty: i + 1 }, queue });
      for (let i = 0; i < 4; i++) await enqueue(waypoint, Reports, { runId: `r${i}`, input: {}, queue });
      const worker = await start({ concurrency: 3, pipelines: [{ pipeline: Orders, concurrency: 1 }, Reports] });
      await waitFor(async () => (await waypoint.list({ status: 'completed' })).length === 10, { what: '10 runs to complete', timeoutMs: 20_000, intervalMs: 20 });
      // The run row completes before its job is settled: wait for the queue side too.
      await waitFor(() => worker.stats.completed === 10, { what: '10 jobs to be completed', timeoutMs: 5_000 });
      assert.equal(probe.peak.get('orders'), 1, 'orders limited to 1 at a time');
      assert.ok((probe.peak.get('all') ?? 0) <= 3, `at most 3 runs at once, saw ${probe.peak.get('all')}`);
      assert.ok((probe.peak.get('all') ?? 0) >= 2, 'runs of the two pipelines overlapped');
      assert.ok(
        [...probe.calls.values()].every((n) => n === 1),
        'every step ran once',
      );
      assert.equal(worker.stats.completed, 10);
      assert.equal(worker.stats.failed, 0);
      assert.deepEqual(await enqueue(waypoint, Orders, { runId: 'o0', queue }).then((r) => [r.jobId, r.enqueued, r.status]), [null, false, 'completed']);
    });

    it('a run locked by another live executor is requeued, then taken once the lease is free', async () => {
      await enqueue(waypoint, Orders, { runId: 'locked', input: { qty: 1 }, queue });
      const grant = await waypoint.store.acquireLease('locked', 'elsewhere:4242:abc', 1_000);
      assert.ok(grant);
      const worker = await start();
      await waitFor(() => worker.stats.requeued >= 1, { what: 'the locked run to be requeued', timeoutMs: 10_000 });
      assert.equal(probe.calls.size, 0, 'nothing ran under the other executor');
      await waitFor(async () => (await status('locked')) === 'completed', { what: 'the run to complete after the lease expired', timeoutMs: 15_000, intervalMs: 20 });
      assert.deepEqual([...probe.calls.values()], [1, 1]);
      const run = await waypoint.store.getRun('locked');
      assert.ok(run!.leaseEpoch > grant.epoch, 'taken over under a new epoch');
    });

    it('stop() pauses a running run at the step boundary and requeues it for another worker', async () => {
      probe.holdMs = 400;
      await enqueue(waypoint, Orders, { runId: 'long', input: { qty: 1 }, queue });
      const first = await start();
      await waitFor(() => probe.running.get('orders') === 1, { what: 'the first step to be running', timeoutMs: 10_000 });
      await first.stop();
      assert.equal(first.stats.requeued, 1);
      assert.deepEqual(first.running(), []);
      const paused = await waypoint.get('long');
      assert.equal(paused?.status, 'paused');
      assert.equal(paused?.lastSequence, 1, 'the running step finished in its grace period and was recorded');
      assert.deepEqual(await queue.counts(queueNameFor('waypoint', 'orders')), { queued: 1, active: 0 });
      probe.holdMs = 10;
      await start();
      await waitFor(async () => (await status('long')) === 'completed', { what: 'the second worker to finish the run', timeoutMs: 15_000, intervalMs: 20 });
      assert.deepEqual([probe.calls.get('long/reserve'), probe.calls.get('long/ship')], [1, 1], 'no step ran twice');
    });

    it('a run that fails completes its job (no queue retries); enqueueing it again retries it', async () => {
      probe.failNext = true;
      await enqueue(waypoint, Reports, { runId: 'broken', input: {}, queue });
      const worker = await start();
      await waitFor(async () => (await status('broken')) === 'failed', { what: 'the run to fail', timeoutMs: 10_000, intervalMs: 20 });
      await waitFor(() => worker.stats.completed === 1, { what: 'its job to complete', timeoutMs: 5_000 });
      await sleep(700); // longer than the retry delay: a failed job would be back by now
      assert.equal(probe.calls.get('broken/draft'), 1, 'the failed step was not retried by the queue');
      assert.equal(worker.stats.failed, 0);
      probe.failNext = false;
      const again = await enqueue(waypoint, Reports, { runId: 'broken', queue });
      assert.equal(again.enqueued, true, 'a new job: the run moved on since the first one');
      await waitFor(async () => (await status('broken')) === 'completed', { what: 'the retried run to complete', timeoutMs: 10_000, intervalMs: 20 });
      assert.equal(probe.calls.get('broken/draft'), 2);
    });

    it('groupConcurrency caps the runs of one group in a worker', async () => {
      for (let i = 0; i < 3; i++) await enqueue(waypoint, Reports, { runId: `t1-${i}`, input: {}, group: 'tenant-1', queue });
      await enqueue(waypoint, Reports, { runId: 't2-0', input: {}, group: 'tenant-2', queue });
      probe.holdMs = 60;
      const worker = await start({ concurrency: 4, groupConcurrency: 1 });
      const peaks: number[] = [];
      const watch = setInterval(() => peaks.push(worker.running().filter((id) => id.startsWith('t1-')).length), 5);
      try {
        await waitFor(async () => (await waypoint.list({ status: 'completed' })).length === 4, { what: 'all 4 runs to complete', timeoutMs: 20_000, intervalMs: 20 });
      } finally {
        clearInterval(watch);
      }
      assert.equal(Math.max(...peaks), 1, 'one tenant-1 run at a time');
      assert.ok([...probe.calls.values()].every((n) => n === 1));
    });
  });
}
