import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import type { LeaseGrant } from '../../src/contract/checkpoint-store';
import { runStoreConformance } from '../../src/testing';
import { appendSteps, cursorAt, leasedRun, newRun, stepRecord, withCode } from '../helpers/store-records';
import { MinimalCheckpointStore } from './minimal-store';

// A store that writes only the primitives passes the same suite as every backend: the derived operations
// (loadRun, appendRun, cancelRun) written once in CheckpointStore are enough.
runStoreConformance({
  name: 'minimal (primitives only)',
  makeStore: () => {
    const store = new MinimalCheckpointStore();
    return Promise.resolve({ store, cleanup: () => store.close() });
  },
  processLocal: true,
});

// ---- The derived cancelRun at its races, which the suite cannot arrange on every backend ----

/** Runs `beforeTakeover` once, just before the next lease acquisition (what another process did meanwhile). */
class RacedStore extends MinimalCheckpointStore {
  beforeTakeover?: () => Promise<void>;
  override async acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    const race = this.beforeTakeover;
    this.beforeTakeover = undefined;
    await race?.();
    return super.acquireLease(runId, owner, ttlMs, takeOverFrom);
  }
}

describe('derived cancelRun', () => {
  it('leaves a run completed just before the takeover completed, with no lease left behind', async () => {
    const store = new RacedStore();
    const epoch = await leasedRun(store, 'r1');
    await appendSteps(store, 'r1', epoch, 1);
    store.beforeTakeover = () => store.updateRun('r1', { status: 'completed' }, { epoch });
    const run = (await store.cancelRun('r1', 'too late'))!;
    assert.deepEqual([run.status, run.resumeHint, run.leaseOwner, run.leaseExpiresAt], ['completed', null, null, null]);
    assert.deepEqual(await store.getRun('r1'), run);
  });

  it('takes the lease over again when another worker took it between the read and the takeover', async () => {
    const store = new RacedStore();
    const epoch = await leasedRun(store, 'r1', 'worker-a');
    store.beforeTakeover = async () => {
      await store.releaseLease('r1', 'worker-a', epoch);
      await store.acquireLease('r1', 'worker-b', 60_000); // the read named worker-a, so this takeover is refused once
    };
    const run = (await store.cancelRun('r1', 'stop'))!;
    assert.deepEqual([run.status, run.leaseOwner, run.leaseEpoch], ['cancelled', null, epoch + 2]);
    // worker-b's epoch (epoch + 1) is fenced out too
    await assert.rejects(store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch: epoch + 1 } }), withCode('LEASE_LOST'));
  });

  it('two concurrent cancels both return the cancelled run, and the executor is fenced out', async () => {
    const store = new MinimalCheckpointStore();
    const epoch = await leasedRun(store, 'r1');
    const [a, b] = await Promise.all([store.cancelRun('r1', 'one'), store.cancelRun('r1', 'two')]);
    assert.deepEqual([a?.status, b?.status], ['cancelled', 'cancelled']);
    // One may return while the other still holds its takeover lease; once both have returned, none is left.
    assert.deepEqual([(await store.getRun('r1'))?.leaseOwner, (await store.getRun('r1'))?.leaseExpiresAt], [null, null]);
    assert.equal(await store.renewLease('r1', 'worker-a', epoch, 60_000), false);
    assert.equal((await store.cancelRun('unknown', 'x')) ?? null, null);
    assert.equal((await store.createRun(newRun('r1'))).run.status, 'cancelled');
  });
});
