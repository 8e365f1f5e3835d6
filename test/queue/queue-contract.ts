import { strict as assert } from 'node:assert';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { jobIdFor, queueNameFor, type Delivery, type RunJob, type RunQueue } from '../../src/queue/index';
import { sleep } from '../helpers/store-records';
import type { QueueBackend, QueueFixture } from './queue-backends';

/**
 * The `RunQueue` contract, written once and run against every binding (pg-boss, BullMQ): idempotent
 * sends, fetch / complete / requeue / fail, priorities, and redelivery of a job whose worker vanished.
 */
export function defineQueueContract(backend: QueueBackend): void {
  describe(`${backend.name} run queue contract`, () => {
    let fixture: QueueFixture;
    let queue: RunQueue;
    const name = queueNameFor('contract', 'pipe-a');

    beforeEach(async (t) => {
      fixture = await backend.open(`queue contract: ${t.name}`);
      queue = fixture.create();
      await queue.start();
    });
    afterEach(async () => {
      await fixture.dispose();
    });

    const job = (runId: string, over: Partial<RunJob> = {}): RunJob => ({ runId, pipeline: 'pipe-a', epoch: 0, enqueuedAt: new Date().toISOString(), ...over });

    it('a second send with the same id is a no-op, and find returns the job', async () => {
      const id = jobIdFor(name, 'r1', 0, 0);
      assert.equal(await queue.send(name, job('r1', { group: 'tenant-1' }), { id }), true);
      assert.equal(await queue.send(name, job('r1'), { id }), false);
      const found = await queue.find(name, id);
      assert.equal(found?.runId, 'r1');
      assert.equal(found?.group, 'tenant-1');
      assert.equal(await queue.find(name, jobIdFor(name, 'other', 0, 0)), null);
      assert.deepEqual(await queue.counts(name), { queued: 1, active: 0 });
      const taken = await queue.fetch(name, 5);
      assert.equal(taken.length, 1, 'one job for the run, however often it was sent');
    });

    it('fetch hands a job to one caller; complete settles it', async () => {
      await queue.send(name, job('r1'), { id: jobIdFor(name, 'r1', 0, 0) });
      await queue.send(name, job('r2'), { id: jobIdFor(name, 'r2', 0, 0) });
      const first = await queue.fetch(name, 1);
      assert.equal(first.length, 1);
      assert.equal(first[0].redeliveries, 0);
      const second = await queue.fetch(name, 5);
      assert.deepEqual(second.map((d) => d.job.runId).sort(), [first[0].job.runId === 'r1' ? 'r2' : 'r1']);
      assert.deepEqual(await queue.fetch(name, 5), [], 'active jobs are not handed out again');
      assert.deepEqual(await queue.counts(name), { queued: 0, active: 2 });
      await queue.complete(first[0], { outcome: 'advanced' });
      await queue.complete(second[0], { outcome: 'advanced' });
      assert.deepEqual(await queue.counts(name), { queued: 0, active: 0 });
      assert.deepEqual(await queue.fetch(name, 5), []);
    });

    it('activeJobs lists the jobs handed out at least olderThanMs ago, with their run job and priority', async () => {
      assert.deepEqual(await queue.activeJobs(name, 0, 10), [], 'nothing handed out yet');
      await queue.send(name, job('held', { epoch: 3 }), { id: jobIdFor(name, 'held', 3, 0), priority: 4 });
      await queue.send(name, job('queued'), { id: jobIdFor(name, 'queued', 0, 0), priority: -1 });
      const [held] = await queue.fetch(name, 1);
      assert.equal(held?.job.runId, 'held');
      await sleep(300);
      assert.deepEqual(await queue.activeJobs(name, 60_000, 10), [], 'not active that long');
      const active = await queue.activeJobs(name, 200, 10);
      assert.deepEqual(
        active.map((a) => [a.id, a.job.runId, a.job.epoch, a.priority]),
        [[held.id, 'held', 3, 4]],
        'only the handed-out job',
      );
      assert.ok(active[0].activeForMs >= 200 && active[0].activeForMs < 60_000, `active for ${active[0].activeForMs} ms`);
      await queue.complete(held, { outcome: 'advanced' });
      assert.deepEqual(await queue.activeJobs(name, 0, 10), [], 'a settled job is no longer active');
    });

    it('higher priority is fetched first', async () => {
      await queue.send(name, job('low'), { id: jobIdFor(name, 'low', 0, 0), priority: -5 });
      await queue.send(name, job('mid'), { id: jobIdFor(name, 'mid', 0, 0) });
      await queue.send(name, job('high'), { id: jobIdFor(name, 'high', 0, 0), priority: 7 });
      const order: string[] = [];
      for (let i = 0; i < 3; i++) {
        const [d] = await queue.fetch(name, 1);
        order.push(d.job.runId);
        assert.equal(d.priority, { low: -5, mid: 0, high: 7 }[d.job.runId]);
      }
      assert.deepEqual(order, ['high', 'mid', 'low']);
    });

    it('requeue gives the same job back after the delay, with its payload and priority', async () => {
      await queue.send(name, job('r1', { epoch: 3 }), { id: jobIdFor(name, 'r1', 3, 0), priority: 2 });
      const [d] = await queue.fetch(name, 1);
      const started = Date.now();
      await queue.requeue(d, 1_200, 'run locked');
      assert.deepEqual(await queue.fetch(name, 1), [], 'not ready before its delay');
      assert.deepEqual(await queue.counts(name), { queued: 1, active: 0 });
      const again = await waitForFetch(queue, name, 8_000);
      assert.ok(Date.now() - started >= 1_000, `handed out again after ${Date.now() - started} ms`);
      assert.deepEqual({ ...again.job, enqueuedAt: '' }, { ...d.job, enqueuedAt: '' });
      assert.equal(again.priority, 2);
      await queue.complete(again, {});
      assert.deepEqual(await queue.counts(name), { queued: 0, active: 0 });
    });

    it('requeue without delay makes the job ready at once', async () => {
      await queue.send(name, job('r1'), { id: jobIdFor(name, 'r1', 0, 0) });
      const [d] = await queue.fetch(name, 1);
      await queue.requeue(d, 0, 'worker stopping');
      const again = await waitForFetch(queue, name, 3_000);
      assert.equal(again.job.runId, 'r1');
    });

    it('a failed delivery is handed out again after the retry delay, counted as a redelivery', async () => {
      await queue.send(name, job('r1'), { id: jobIdFor(name, 'r1', 0, 0) });
      const [d] = await queue.fetch(name, 1);
      await queue.fail(d, new Error('store unavailable'));
      const again = await waitForFetch(queue, name, 8_000);
      assert.equal(again.job.runId, 'r1');
      assert.ok(again.redeliveries >= 1, `redeliveries ${again.redeliveries}`);
    });

    it("a delivery whose worker vanished is handed out again by the queue's own expiry / stall check", async () => {
      await queue.send(name, job('r1'), { id: jobIdFor(name, 'r1', 0, 0) });
      const doomed = fixture.create();
      const [d] = await doomed.fetch(name, 1);
      assert.equal(d?.job.runId, 'r1');
      // The worker dies: no settle, no lock renewal, connections gone.
      await doomed.close();
      const started = Date.now();
      const again = await waitForFetch(queue, name, 15_000);
      assert.equal(again.job.runId, 'r1');
      assert.ok(again.redeliveries >= 1, `redeliveries ${again.redeliveries}`);
      assert.ok(Date.now() - started >= 500, 'not before the expiry');
      await queue.complete(again, {});
    });

    it('a foreign job in the queue is refused loudly, not handed out', async () => {
      const logged: string[] = [];
      const watched = fixture.create({ debug() {}, info() {}, warn() {}, error: (msg, fields) => logged.push(`${msg} ${JSON.stringify(fields)}`) });
      // Same queue, payload not a run job (someone else's producer): fetch must not return it, ever.
      await watched.send(name, { hello: 'world' } as unknown as RunJob, { id: jobIdFor(name, 'foreign', 0, 0) });
      assert.deepEqual(await watched.fetch(name, 5), []);
      assert.equal(logged.length, 1);
      assert.match(logged[0], /foreign job in a Waypoint queue.*INVALID_JOB/);
      await sleep(300);
      assert.deepEqual(await watched.fetch(name, 5), []);
      assert.deepEqual(await watched.counts(name), { queued: 0, active: 0 });
    });
  });
}

async function waitForFetch(queue: RunQueue, name: string, timeoutMs: number): Promise<Delivery> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const [d] = await queue.fetch(name, 1);
    if (d) return d;
    if (Date.now() > deadline) throw new Error(`no job handed out on ${name} within ${timeoutMs} ms`);
    await sleep(100);
  }
}
