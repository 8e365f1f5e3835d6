import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { afterEach, describe, it } from 'node:test';
import { Agent, Pipeline, Step, Waypoint, type CheckpointStore } from '../../src/index';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { storeModule } from './backends';

// Waiting for another executor's lease (`waitForLockMs`) must end like any later call would: when that
// executor finished or cancelled the run meanwhile, the waiter gets the result or RUN_CANCELLED. Two
// workers in one process, each with its own store on one PostgreSQL schema, as two processes would be.
let release: () => void = () => undefined;
let started: () => void = () => undefined;

class Worker extends Agent {
  @Step()
  async slow() {
    started();
    await new Promise<void>((resolve) => (release = resolve));
    return { slow: true };
  }

  @Step()
  fast() {
    return { fast: true };
  }
}

@Pipeline({ name: 'lease-wait', version: '1.0.0', agents: [Worker] })
class LeaseWait {}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function twoWorkers(name: string, shareOneStore = false) {
  const schema = schemaFor(`lease wait: ${name}`);
  await dropSchema(schema);
  const open = () => new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 2 });
  const shared: CheckpointStore | null = shareOneStore ? open() : null;
  const create = (workerId: string) => Waypoint.create({ modules: [storeModule(shared ?? open())], leaseTtlMs: 5_000, workerId });
  const first = await create('first');
  const second = await create('second');
  cleanups.push(async () => (await first.close(), await second.close().catch(() => undefined), await dropSchema(schema)));
  const holding = new Promise<void>((resolve) => (started = resolve));
  return { first, second, holding };
}

describe('waiting for a lease held by another executor', () => {
  // Fails today (src/core/run/run-driver.ts advance()): the completed / cancelled status is checked before
  // the lease is acquired only; the waiter, once it holds the lease, throws INVALID_TRANSITION.
  it('returns the completed result when the holder completes the run meanwhile', async () => {
    const { first, second, holding } = await twoWorkers('completed');
    const firstRun = first.run(LeaseWait, { runId: 'r1', input: {} });
    await holding;
    const waiting = second.run(LeaseWait, { runId: 'r1', waitForLockMs: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 100)); // the second call is polling for the lease
    release();
    assert.equal((await firstRun).status, 'completed');
    const result = await waiting;
    assert.deepEqual([result.status, result.stepsExecuted, result.lastSequence], ['completed', 0, 2]);
  });

  it('fails with RUN_CANCELLED when the run is cancelled meanwhile', async () => {
    const { first, second, holding } = await twoWorkers('cancelled');
    const firstRun = first.run(LeaseWait, { runId: 'r1', input: {} }).catch((error: { code?: string }) => error.code);
    await holding;
    // Handled from the start: the cancel stops the first executor at once (it checks its lease now), so the
    // waiter may be refused while the test still awaits the first run.
    const waiting = second.run(LeaseWait, { runId: 'r1', waitForLockMs: 5_000 }).then(
      () => 'resolved',
      (error: { code?: string }) => error.code,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    await first.cancel('r1', 'operator');
    release();
    assert.equal(await firstRun, 'RUN_CANCELLED');
    assert.equal(await waiting, 'RUN_CANCELLED');
  });

  // Fails today (src/core/run/run-driver.ts advance(), the in-process guard `activeRuns`): two Waypoints on
  // one store object refuse at once, ignoring waitForLockMs, and name the caller as the holder.
  it('two Waypoints sharing one store: the second waits for the lease and RUN_LOCKED names the real holder', async () => {
    const { first, second, holding } = await twoWorkers('shared store', true);
    const firstRun = first.run(LeaseWait, { runId: 'r1', input: {} });
    await holding;
    await assert.rejects(second.run(LeaseWait, { runId: 'r1' }), (error: { code?: string; owner?: string }) => {
      assert.equal(error.code, 'RUN_LOCKED');
      assert.equal(error.owner, 'first', 'the holder is named');
      return true;
    });
    const waiting = second.run(LeaseWait, { runId: 'r1', waitForLockMs: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    release();
    await firstRun;
    assert.equal((await waiting).status, 'completed');
  });
});
