// The record builders moved to src/testing (shipped as waypoint-durable/testing with the conformance suite);
// the tests keep importing them from here.
import type { RunRecord, StepRecord } from '../../src/contract/checkpoint-store';

export * from '../../src/testing/store-records';

/**
 * A whole stored run row, for code that reads runs without a store (views, timelines, sessions): a completed
 * run 'r' of pipeline 'p' version '1', lease epoch 1, created and updated at the epoch; `over` changes any column.
 *
 * @example
 * runRecord({ status: 'paused', leaseEpoch: 2 })
 */
export function runRecord(over: Partial<RunRecord> = {}): RunRecord {
  return {
    runId: 'r',
    pipelineName: 'p',
    pipelineVersion: '1',
    status: 'completed',
    cursorAgent: 1,
    cursorStep: 0,
    lastSequence: 0,
    input: '{}',
    metadata: '{}',
    leaseOwner: null,
    leaseEpoch: 1,
    leaseExpiresAt: null,
    error: null,
    resumeHint: null,
    createdAt: new Date(0),
    updatedAt: new Date(0),
    ...over,
  };
}

/**
 * A Redis step entry as releases before the short keys wrote it (long key names, epoch-ms dates, no run
 * id): what an existing Redis store holds and must go on reading.
 *
 * @example
 * await admin.hset(`${prefix}run:{r1}:steps`, '1', legacyRedisStepEntry(step));
 */
export function legacyRedisStepEntry(step: StepRecord): string {
  return JSON.stringify({
    sequence: step.sequence,
    checkpointId: step.checkpointId,
    agentIndex: step.agentIndex,
    agentId: step.agentId,
    stepIndex: step.stepIndex,
    stepName: step.stepName,
    status: step.status,
    output: step.output,
    memory: step.memory,
    idempotencyKey: step.idempotencyKey,
    sideEffectsCommitted: step.sideEffectsCommitted,
    startedAt: step.startedAt.getTime(),
    completedAt: step.completedAt.getTime(),
    attempt: step.attempt,
    sha256: step.sha256,
    ...(step.path != null ? { path: step.path } : {}),
  });
}
