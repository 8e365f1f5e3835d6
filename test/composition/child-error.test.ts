// A failed child run's stored error as its parent sees it: a WaypointError whose code is typed, so a code
// the child stored that is not Waypoint's becomes CHILD_RUN_FAILED and stays readable as its cause, and a
// collected item's description still shows the code the child stored.
import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { childError } from '../../src/composition/child-runs';
import type { RunRecord } from '../../src/contract/records';
import { itemError } from '../../src/core/flow/flow-scope';
import { serialize } from '../../src/core/state/serializer';
import { WaypointError } from '../../src';

function child(status: RunRecord['status'], stored: unknown): RunRecord {
  return { runId: 'parent/out/0', status, error: stored === null ? null : serialize(stored) } as RunRecord;
}

describe("a child run's stored error", () => {
  it('keeps a Waypoint code as the error code', () => {
    const error = childError(child('failed', { name: 'StepFailedError', message: 'Step failed.', code: 'STEP_FAILED' }));
    assert.ok(error instanceof WaypointError);
    assert.equal(error.code, 'STEP_FAILED');
    assert.equal(error.message, 'Step failed.');
    assert.equal(error.runId, 'parent/out/0');
    assert.deepEqual(itemError(error, 'parent/out/0', 'failed', 0).error, { code: 'STEP_FAILED', message: 'Step failed.' });
  });

  it("turns a code that is not Waypoint's into CHILD_RUN_FAILED, keeping the stored error as its cause", () => {
    for (const code of ['ECONNRESET', null, undefined]) {
      const stored = { name: 'Error', message: 'socket hang up', code };
      const error = childError(child('failed', stored));
      assert.ok(error instanceof WaypointError);
      assert.equal(error.code, 'CHILD_RUN_FAILED');
      assert.equal(error.message, 'socket hang up');
      assert.equal((error.cause as { code?: unknown }).code, code);
      const described = itemError(error, 'parent/out/0', 'failed', 0).error as { code: string };
      assert.equal(described.code, typeof code === 'string' ? code : 'CHILD_RUN_FAILED');
    }
  });

  it('names a child that ended without a stored error by its status', () => {
    const cancelled = childError(child('cancelled', null));
    assert.ok(cancelled instanceof WaypointError && cancelled.code === 'RUN_CANCELLED');
    const failed = childError(child('failed', null));
    assert.ok(failed instanceof WaypointError && failed.code === 'CHILD_RUN_FAILED');
    assert.equal(failed.message, "Child run 'parent/out/0' is failed.");
  });
});
