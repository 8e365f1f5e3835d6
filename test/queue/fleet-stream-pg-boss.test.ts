import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule, inject, injectable } from 'inversify';
import { Agent, JsonLogger, Pipeline, Step, TOKENS, Waypoint, postgresStorage, visibleParts, type RunStreamEvent, type StepContext } from '../../src/index';
import { enqueue, startWorker, type FleetWorker } from '../../src/queue/index';
import { waitFor } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { pgBossBackend } from './queue-backends';

/** Which worker's container made the agent: each in-process worker binds its own name. */
const WORKER = Symbol('worker name');

/** Set by the test: called when worker A's attempt of `speak` has emitted its parts and holds the run. */
const held = { resolve: null as (() => void) | null };

const PARTS = 20;

@injectable()
class Speaker extends Agent {
  constructor(@inject(WORKER) private readonly worker: string) {
    super();
  }

  @Step()
  greet(ctx: StepContext) {
    for (let i = 0; i < PARTS; i++) ctx.emit({ worker: this.worker, step: 'greet', i });
    return { greeted: this.worker };
  }

  /** On worker A it emits, then holds until the worker's stop aborts it (the attempt is abandoned); on B it completes. */
  @Step()
  async speak(ctx: StepContext) {
    for (let i = 0; i < PARTS; i++) ctx.emit({ worker: this.worker, step: 'speak', i });
    if (this.worker === 'A') {
      held.resolve?.();
      await new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason as Error), { once: true }));
    }
    return { spoke: this.worker };
  }
}

@Pipeline({ name: 'fleet-stream', version: '1.0.0', agents: [Speaker] })
class Speech {}

const quiet = () => new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(new JsonLogger('error')));

/**
 * Issue 37's fleet case: a reader follows a run's live output while the run moves from one pg-boss worker to
 * another (worker A stops mid-step: its attempt is abandoned, the run paused and requeued, worker B finishes
 * it). The reader is one `for await` from offset 0 that never reconnects, on a store object of its own.
 */
describe('live output across the fleet (pg-boss)', () => {
  it('a reader that never reconnects ends with exactly the recorded attempts: the abandoned attempt on the first worker is retracted', { timeout: 90_000 }, async () => {
    const schema = schemaFor('fleet stream: pg-boss');
    await dropSchema(schema);
    const fixture = await pgBossBackend.open('fleet stream: pg-boss');
    const member = (name: string) =>
      Waypoint.create({
        modules: [postgresStorage({ url: PG_TEST_URL, schema }), quiet(), new ContainerModule(({ bind }) => void bind(WORKER).toConstantValue(name))],
        leaseTtlMs: 2_000,
      });
    const client = await member('client');
    const workers: { worker: FleetWorker; waypoint: Waypoint }[] = [];
    const start = async (name: string) => {
      const waypoint = await member(name);
      const worker = await startWorker(waypoint, { pipelines: [Speech], queue: fixture.create(), pollIntervalMs: 50, signals: [], recoverOrphans: false, gracePeriodMs: 100 });
      workers.push({ worker, waypoint });
      return worker;
    };
    try {
      const holding = new Promise<void>((resolve) => (held.resolve = resolve));
      await enqueue(client, Speech, { runId: 'moving', input: {}, queue: fixture.create() });
      // The reader: one iteration from offset 0, on its own store object, never restarted.
      const reading = (async () => {
        const events: RunStreamEvent[] = [];
        for await (const event of client.stream('moving', { from: 0 })) events.push(event);
        return events;
      })();
      const a = await start('A');
      await holding;
      await a.stop('moving the run to another worker');
      assert.equal(a.stats.requeued, 1, 'worker A requeued the run it held');
      assert.equal((await client.get('moving'))?.status, 'paused');
      await start('B');
      await waitFor(async () => (await client.get('moving'))?.status === 'completed', { what: 'worker B to finish the run', timeoutMs: 30_000, intervalMs: 50 });
      const events = await reading;

      assert.deepEqual(
        events.map((e) => e.offset),
        events.map((_, i) => i),
        'offsets contiguous from 0',
      );
      const expected = [
        ...Array.from({ length: PARTS }, (_, i) => ({ worker: 'A', step: 'greet', i })),
        ...Array.from({ length: PARTS }, (_, i) => ({ worker: 'B', step: 'speak', i })),
      ];
      assert.deepEqual(
        visibleParts(events).map((p) => p.data),
        expected,
        'what the reader shows: greet from worker A, speak from worker B',
      );
      const abandoned = events.filter((e) => e.kind === 'part' && (e.data as { worker: string; step: string }).worker === 'A' && (e.data as { step: string }).step === 'speak');
      assert.ok(abandoned.length > 0, "worker A's abandoned attempt reached the stream before it was withdrawn");
      const retract = events.findIndex((e) => e.kind === 'retract' && e.step === 'Speaker/speak');
      assert.ok(retract > events.indexOf(abandoned[abandoned.length - 1]), 'the retraction follows the abandoned parts');
      const firstOfB = events.findIndex((e) => e.kind === 'part' && (e.data as { worker: string }).worker === 'B');
      assert.ok(retract < firstOfB, "the retraction comes before any part of worker B's attempt");
      const statuses = events.flatMap((e) => (e.kind === 'status' ? [e.status] : []));
      assert.deepEqual(statuses.slice(-1), ['completed']);
      assert.ok(statuses.indexOf('paused') >= 0 && statuses.lastIndexOf('running') > statuses.indexOf('paused'), `paused, then running again: ${statuses.join(' → ')}`);
      const run = await client.store.getRun('moving');
      assert.equal(run?.status, 'completed');
    } finally {
      held.resolve = null;
      for (const { worker, waypoint } of workers) {
        await worker.stop();
        await waypoint.close();
      }
      await client.close();
      await fixture.dispose();
      await dropSchema(schema);
    }
  });
});
