import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import type { OperationRecord, RunRecord, StepRecord } from '../../src/contract/checkpoint-store';
import { analyzeSessions } from '../../src/core/history/sessions';
import { runRecord } from '../helpers/store-records';

const T0 = Date.parse('2026-03-01T10:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms);

const run = (patch: Partial<RunRecord> = {}) => runRecord({ createdAt: at(0), updatedAt: at(0), ...patch });

/** Steps s0..s(n-1) of agent A, each [start, end] in ms after T0. */
function steps(spans: [number, number][], patch: (i: number) => Partial<StepRecord> = () => ({})): StepRecord[] {
  return spans.map(([start, end], i) => ({
    runId: 'r',
    sequence: i + 1,
    checkpointId: `c${i}`,
    agentIndex: 0,
    agentId: 'A',
    stepIndex: i,
    stepName: `s${i}`,
    status: 'completed',
    output: '{}',
    memory: null,
    idempotencyKey: `k${i}`,
    sideEffectsCommitted: false,
    startedAt: at(start),
    completedAt: at(end),
    attempt: 1,
    sha256: '',
    ...patch(i),
  }));
}

function failed(stepKey: string, attempt: number, ms: number): OperationRecord {
  return {
    operationKey: `${stepKey}#${attempt}@${ms}`,
    runId: 'r',
    stepKey,
    name: `attempt:${attempt}`,
    state: 'failed',
    result: null,
    error: '{"name":"Error","message":"boom","code":null}',
    attempts: 1,
    createdAt: at(ms),
    updatedAt: at(ms),
  };
}

describe('ui: sessions and resume points', () => {
  it('a run leased once has one session and no resume point, however long its idle gaps', () => {
    const rows = steps([
      [5, 10],
      [5000, 5010],
      [5011, 5020],
    ]);
    const a = analyzeSessions(run({ leaseEpoch: 1 }), rows, []);
    assert.equal(a.sessions, 1);
    assert.deepEqual(a.resumePoints, []);
    assert.deepEqual([...a.sessionOf.values()], [1, 1, 1]);
  });

  it('with two lease acquisitions the largest idle gap is the resume point', () => {
    const rows = steps([
      [5, 10],
      [11, 20],
      [400, 420],
      [421, 430],
      [900, 910],
    ]);
    const a = analyzeSessions(run({ leaseEpoch: 2 }), rows, []);
    assert.equal(a.sessions, 2);
    assert.equal(a.resumePoints.length, 1);
    const [p] = a.resumePoints;
    assert.deepEqual(
      { after: p.afterSequence, before: p.beforeSequence, gap: p.gapMs, reason: p.reason, session: p.session },
      { after: 4, before: 5, gap: 470, reason: 'gap', session: 2 },
    );
    assert.deepEqual([...a.sessionOf.values()], [1, 1, 1, 1, 2]);
  });

  it('gaps shorter than minGapMs are never resume points, even within the lease budget', () => {
    const rows = steps([
      [5, 10],
      [60, 70],
    ]);
    assert.equal(analyzeSessions(run({ leaseEpoch: 3 }), rows, []).resumePoints.length, 0);
    assert.equal(analyzeSessions(run({ leaseEpoch: 3 }), rows, [], { minGapMs: 40 }).resumePoints.length, 1);
  });

  it('a cancel bumps the epoch without a session: it does not buy a resume point', () => {
    const rows = steps([
      [5, 10],
      [800, 810],
    ]);
    assert.equal(analyzeSessions(run({ leaseEpoch: 2, status: 'cancelled' }), rows, []).resumePoints.length, 0);
    assert.equal(analyzeSessions(run({ leaseEpoch: 2, status: 'paused' }), rows, []).resumePoints.length, 1);
  });

  it('retries in one session are not resume points, and the retried step keeps its attempts', () => {
    const rows = steps(
      [
        [5, 10],
        [900, 910],
      ],
      (i) => (i === 1 ? { attempt: 3 } : {}),
    );
    const ops = [failed('A/s1', 1, 300), failed('A/s1', 2, 700)];
    const a = analyzeSessions(run({ leaseEpoch: 1 }), rows, ops);
    assert.equal(a.resumePoints.length, 0);
    assert.deepEqual(
      a.attempts.map((x) => [x.stepKey, x.attempt, x.session]),
      [
        ['A/s1', 1, 1],
        ['A/s1', 2, 1],
      ],
    );
  });

  it('an attempt count that restarts proves a new session, even before the gap budget', () => {
    // Attempt 2 failed, the process died, the next process succeeded at its attempt 1.
    const rows = steps(
      [
        [5, 10],
        [90, 100],
      ],
      (i) => (i === 1 ? { attempt: 1 } : {}),
    );
    const ops = [failed('A/s1', 1, 30), failed('A/s1', 2, 60)];
    const a = analyzeSessions(run({ leaseEpoch: 2 }), rows, ops);
    assert.equal(a.resumePoints.length, 1);
    const [p] = a.resumePoints;
    assert.equal(p.reason, 'attempts');
    assert.equal(p.beforeSequence, 2);
    assert.equal(p.gapMs, 30);
    assert.deepEqual(
      a.attempts.map((x) => x.session),
      [1, 1],
    );
    assert.equal(a.sessionOf.get(2), 2);
  });

  it('attempts of a step with no row (the failing step) are placed, and can open a session', () => {
    const rows = steps([
      [5, 10],
      [11, 20],
    ]);
    const ops = [failed('A/s2', 1, 2000), failed('A/s2', 2, 2300)];
    const a = analyzeSessions(run({ leaseEpoch: 2, status: 'failed' }), rows, ops);
    assert.equal(a.resumePoints.length, 1);
    assert.deepEqual({ after: a.resumePoints[0].afterSequence, before: a.resumePoints[0].beforeSequence, key: a.resumePoints[0].stepKey }, { after: 2, before: null, key: 'A/s2' });
    assert.deepEqual(
      a.attempts.map((x) => x.session),
      [2, 2],
    );
  });

  it('a fork: copied rows are session 0 and the first own step opens session 1 at a fork point', () => {
    const rows = steps(
      [
        [5, 10],
        [11, 20],
        [50_000, 50_010],
      ],
      (i) => (i < 2 ? { checkpointId: `c${i}:fork` } : {}),
    );
    const a = analyzeSessions(run({ leaseEpoch: 2, createdAt: at(40_000) }), rows, []);
    assert.deepEqual(
      [...a.sessionOf.entries()],
      [
        [1, 0],
        [2, 0],
        [3, 1],
      ],
    );
    assert.equal(a.resumePoints.length, 1);
    assert.equal(a.resumePoints[0].reason, 'fork');
    assert.equal(a.resumePoints[0].afterSequence, 2);
    assert.equal(a.sessions, 1);
  });

  it('a forked run not resumed yet has no session of its own', () => {
    const rows = steps([[5, 10]], () => ({ checkpointId: 'c0:fork' }));
    const a = analyzeSessions(run({ leaseEpoch: 1, status: 'paused' }), rows, []);
    assert.equal(a.sessions, 0);
    assert.deepEqual(a.resumePoints, []);
  });
});
