import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { injectable } from 'inversify';
import { IsInt, IsOptional } from 'class-validator';
import { Agent, Pipeline, Step, Waypoint, memoryStorage, type StepContext } from '../../src/index';
import { withCode } from '../helpers/store-records';

class CountState {
  @IsOptional()
  @IsInt()
  done?: number;
}

/** Runs of the step, per run id; `failing` runs throw. */
const runs = new Map<string, number>();
const failing = new Set<string>();

@injectable()
class OneStep extends Agent {
  @Step()
  work(ctx: StepContext<CountState>) {
    runs.set(ctx.runId, (runs.get(ctx.runId) ?? 0) + 1);
    if (failing.has(ctx.runId)) throw new Error(`run ${ctx.runId} fails`);
    return { done: 1 };
  }
}

@Pipeline({ name: 'retry-failed', version: '1.0.0', state: CountState, agents: [OneStep] })
class RetryFailed {}

/**
 * `RunOptions.retryFailed: false`, what a fleet worker passes for the deliveries the runtime made for itself
 * (a wake-up, a recovery): a failed run is not run again, whether it had failed before the call or fails
 * between the call's look at it and its lease.
 */
describe('retryFailed: false', () => {
  it('a run that had failed is not run again, and its lease epoch stays', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [RetryFailed] });
    try {
      failing.add('f1');
      await assert.rejects(waypoint.run(RetryFailed, { runId: 'f1', input: {} }), withCode('STEP_FAILED'));
      const failed = (await waypoint.store.getRun('f1'))!;
      assert.equal(failed.status, 'failed');
      failing.delete('f1');
      await assert.rejects(waypoint.run(RetryFailed, { runId: 'f1', retryFailed: false }), withCode('RUN_NOT_RETRIED'));
      assert.equal(runs.get('f1'), 1, 'the failed step did not run again');
      const after = (await waypoint.store.getRun('f1'))!;
      assert.deepEqual([after.status, after.leaseEpoch], ['failed', failed.leaseEpoch]);
      // The default (a user's resume or retry) runs it again from its failed step.
      assert.equal((await waypoint.run(RetryFailed, { runId: 'f1' })).status, 'completed');
      assert.equal(runs.get('f1'), 2);
    } finally {
      await waypoint.close();
    }
  });

  it('a run that fails between the look at it and the lease is not run either: checked again under the lease', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [RetryFailed] });
    try {
      await waypoint.prepare(RetryFailed, { runId: 'f2', input: {} });
      const store = waypoint.store;
      const acquire = store.acquireLease.bind(store);
      // Another executor fails the run in the instant after this call read it open and before its lease.
      store.acquireLease = async (runId, owner, ttlMs, takeOverFrom) => {
        if (runId === 'f2') await store.updateRun('f2', { status: 'failed' }, null);
        return acquire(runId, owner, ttlMs, takeOverFrom);
      };
      await assert.rejects(waypoint.run(RetryFailed, { runId: 'f2', retryFailed: false }), withCode('RUN_NOT_RETRIED'));
      assert.equal(runs.get('f2'), undefined, 'nothing ran');
      const after = (await store.getRun('f2'))!;
      assert.equal(after.status, 'failed');
      assert.equal(after.leaseOwner, null, 'the lease was released');
    } finally {
      await waypoint.close();
    }
  });
});
