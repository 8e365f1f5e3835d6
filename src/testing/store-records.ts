import { strict as assert } from 'node:assert';
import type { CheckpointStore, CursorUpdate, NewRun, StepRecord } from '../contract/checkpoint-store';

/**
 * Record builders and assertions shared by the storage tests, so each case states only what differs.
 *
 * @example
 * await store.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch } });
 */

export function newRun(runId: string, over: Partial<NewRun> = {}): NewRun {
  return { runId, pipelineName: 'financial-analysis', pipelineVersion: '2.1.0', input: '{"ticker":"AAPL"}', metadata: '{"host":"test"}', ...over };
}

/** A completed step row; timestamps carry odd milliseconds so precision loss shows. */
export function stepRecord(runId: string, sequence: number, over: Partial<StepRecord> = {}): StepRecord {
  return {
    runId,
    sequence,
    checkpointId: `${runId}-cp-${sequence}`,
    agentIndex: 0,
    agentId: 'research',
    stepIndex: sequence - 1,
    stepName: `step${sequence}`,
    status: 'completed',
    output: JSON.stringify({ n: sequence }),
    memory: sequence % 2 === 0 ? null : JSON.stringify({ seen: sequence }),
    idempotencyKey: `${runId}/research/step${sequence}`,
    sideEffectsCommitted: sequence % 2 === 0,
    startedAt: new Date(1_700_000_000_001 + sequence * 1000),
    completedAt: new Date(1_700_000_000_999 + sequence * 1000),
    attempt: 1,
    sha256: 'ab'.repeat(32),
    path: null,
    ...over,
  };
}

export function cursorAt(stepIndex: number, over: Partial<CursorUpdate> = {}): CursorUpdate {
  return { cursorAgent: 0, cursorStep: stepIndex, status: 'running', resumeHint: null, ...over };
}

/** Creates the run, takes its lease for `owner`, and returns the epoch. */
export async function leasedRun(store: CheckpointStore, runId: string, owner = 'worker-a'): Promise<number> {
  await store.createRun(newRun(runId));
  const grant = await store.acquireLease(runId, owner, 60_000);
  assert.ok(grant, `lease on ${runId}`);
  return grant.epoch;
}

/** Appends steps 1..count (or from `from`) under `epoch`. */
export async function appendSteps(store: CheckpointStore, runId: string, epoch: number, count: number, from = 1): Promise<StepRecord[]> {
  const steps: StepRecord[] = [];
  for (let sequence = from; sequence < from + count; sequence++) {
    const step = stepRecord(runId, sequence);
    await store.appendStep({ step, run: cursorAt(sequence), fence: { epoch } });
    steps.push(step);
  }
  return steps;
}

/** For `assert.rejects`: the error carries this stable `code`. */
export function withCode(code: string): (err: unknown) => true {
  return (err: unknown) => {
    assert.equal((err as { code?: unknown }).code, code, `expected ${code}, got ${String(err)}`);
    return true;
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Asserts a store-set timestamp is a real Date near now (catches time zone and unit mistakes). */
export function assertRecent(date: Date | null, label: string): void {
  assert.ok(date instanceof Date, `${label} is a Date`);
  assert.ok(Math.abs(date.getTime() - Date.now()) < 10_000, `${label} (${date.toISOString()}) is within 10s of now`);
}
