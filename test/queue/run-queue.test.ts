import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { DEFAULT_QUEUE, jobIdFor, queueNameFor } from '../../src/queue/index';
import { checkPriority, parseRunJob, requeueIdFor } from '../../src/queue/run-queue';
import { withCode } from '../helpers/store-records';

describe('run queue naming and ids', () => {
  it('queue names: one per pipeline, characters outside [A-Za-z0-9_.-] percent-encoded', () => {
    assert.equal(queueNameFor(DEFAULT_QUEUE, 'financial-analysis'), 'waypoint.financial-analysis');
    assert.equal(queueNameFor('reports', 'a:b c'), 'reports.a%3ab%20c', "no ':' (BullMQ) and no spaces");
    assert.equal(queueNameFor('q', 'é'), 'q.%c3%a9');
    assert.notEqual(queueNameFor('q', 'a:b'), queueNameFor('q', 'a%3ab'), 'distinct pipeline names stay distinct');
    assert.throws(() => queueNameFor('bad name', 'p'), withCode('INVALID_ARGUMENT'));
    assert.throws(() => queueNameFor('', 'p'), withCode('INVALID_ARGUMENT'));
  });

  it('job ids: deterministic uuids per (queue, run, incarnation, epoch)', () => {
    const id = jobIdFor('waypoint.p', 'run-1', 0, new Date(1_700_000_000_000));
    assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(jobIdFor('waypoint.p', 'run-1', 0, 1_700_000_000_000), id, 'same run, same state: same job');
    const others = [
      jobIdFor('waypoint.p', 'run-1', 1, 1_700_000_000_000),
      jobIdFor('waypoint.p', 'run-2', 0, 1_700_000_000_000),
      jobIdFor('waypoint.q', 'run-1', 0, 1_700_000_000_000),
      jobIdFor('waypoint.p', 'run-1', 0, 1_700_000_000_001),
    ];
    assert.equal(new Set([id, ...others]).size, 5, 'epoch, run, queue and incarnation each change the id');
    assert.equal(requeueIdFor(id), requeueIdFor(id));
    assert.notEqual(requeueIdFor(id), id);
  });

  it('priorities are integers within BullMQ and pg-boss range', () => {
    assert.equal(checkPriority(undefined, 'r'), 0);
    assert.equal(checkPriority(-1_000_000, 'r'), -1_000_000);
    for (const bad of [0.5, 1_000_001, '1', Number.NaN]) assert.throws(() => checkPriority(bad, 'r'), withCode('INVALID_ARGUMENT'));
  });

  it('job payloads are checked when read back', () => {
    const job = { runId: 'r', pipeline: 'p', epoch: 2, enqueuedAt: '2026-01-01T00:00:00.000Z', group: 'g', extra: 'dropped' };
    assert.deepEqual(parseRunJob(job, 'j'), { runId: 'r', pipeline: 'p', epoch: 2, enqueuedAt: '2026-01-01T00:00:00.000Z', group: 'g' });
    // A fan-out parent's wake-up keeps its flag; anything but true is dropped.
    assert.equal(parseRunJob({ ...job, wake: true }, 'j').wake, true);
    assert.equal(parseRunJob({ ...job, wake: 'yes' }, 'j').wake, undefined);
    assert.throws(() => parseRunJob({ runId: 'r' }, 'j'), withCode('INVALID_JOB'));
    assert.throws(() => parseRunJob(null, 'j'), withCode('INVALID_JOB'));
  });
});
