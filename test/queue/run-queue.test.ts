import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { DEFAULT_QUEUE, jobIdFor, queueNameFor } from '../../src/queue/index';
import { checkPriority, isWakeJob, jobBlocker, parseRunJob, requeueIdFor, retriesFailedRun, type RunJob } from '../../src/contract/run-queue';
import type { RunRecord } from '../../src/index';
import { runRecord, withCode } from '../helpers/store-records';

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

  it("job ids: a wake-up, a retry and a recovery never share the id of the user's enqueue of the same epoch", () => {
    const born = 1_700_000_000_000;
    const enqueue = jobIdFor('waypoint.p', 'run-1', 2, born, 'enqueue');
    assert.equal(enqueue, jobIdFor('waypoint.p', 'run-1', 2, born), "an enqueue keeps the earlier release's id, so it deduplicates against its jobs");
    const kinds = (['retry', 'wake', 'recover'] as const).map((kind) => jobIdFor('waypoint.p', 'run-1', 2, born, kind));
    assert.equal(new Set([enqueue, ...kinds]).size, 4, 'one id per kind');
    assert.equal(jobIdFor('waypoint.p', 'run-1', 2, born, 'wake'), kinds[1], 'many senders of one wake-up, one job');
    assert.notEqual(jobIdFor('waypoint.p', 'run-1', 3, born, 'retry'), kinds[0], 'a retry per failure (epoch)');
  });

  it("jobBlocker: only the user's retry runs a failed run; nothing runs a finished one or one advanced since the job was sent", () => {
    const job = (over: Partial<RunJob>): RunJob => ({ runId: 'r', pipeline: 'p', epoch: 2, enqueuedAt: '2026-01-01T00:00:00.000Z', ...over });
    const run = (status: RunRecord['status'], leaseEpoch = 2) => runRecord({ runId: 'r', pipelineName: 'p', status, leaseEpoch });
    const legacyWake = job({ wake: true });
    const legacy = job({});
    const table: [string, RunRecord, RunJob, boolean][] = [
      // [what, run, job, may advance]
      ['retry of the failure it was sent for', run('failed'), job({ kind: 'retry' }), true],
      ['retry after a later execution failed again', run('failed', 3), job({ kind: 'retry' }), false],
      ['wake-up sent while the failing execution ran', run('failed'), job({ kind: 'wake', wake: true }), false],
      ['recovery of a run that then failed', run('failed'), job({ kind: 'recover' }), false],
      ['enqueue of a running run that then failed', run('failed'), job({ kind: 'enqueue' }), false],
      ["an earlier release's wake-up (wake flag, no kind)", run('failed'), legacyWake, false],
      ["an earlier release's enqueue (may be the user's retry)", run('failed'), legacy, true],
      ['wake-up of a waiting parent', run('waiting'), job({ kind: 'wake', wake: true }), true],
      ['wake-up of a parent waiting again under a later epoch', run('waiting', 3), job({ kind: 'wake', wake: true }), false],
      ['wake-up of a paused parent', run('paused', 5), job({ kind: 'wake', wake: true }), true],
      ['wake-up of a running parent (its lease decides)', run('running', 3), job({ kind: 'wake', wake: true }), true],
      ['enqueue of a paused run', run('paused'), job({ kind: 'enqueue' }), true],
      ['retry of a completed run', run('completed'), job({ kind: 'retry' }), false],
      ['enqueue of a cancelled run', run('cancelled'), job({ kind: 'enqueue' }), false],
    ];
    for (const [what, record, delivered, advances] of table) {
      assert.equal(jobBlocker(record, delivered) === null, advances, `${what}: ${jobBlocker(record, delivered)}`);
    }
    assert.match(jobBlocker(run('failed'), job({ kind: 'wake' }))!, /a wake job never runs a failed run again/);
    assert.equal(isWakeJob(legacyWake), true);
    assert.equal(isWakeJob(job({ kind: 'wake' })), true);
    assert.equal(isWakeJob(legacy), false);
    assert.equal(retriesFailedRun(legacy), true);
    assert.equal(retriesFailedRun(job({ kind: 'enqueue' })), false);
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
    // What a job is survives the queue; a kind this release does not know reads as a runtime job (never a retry).
    assert.equal(parseRunJob({ ...job, kind: 'retry' }, 'j').kind, 'retry');
    assert.equal(parseRunJob({ ...job, kind: 'wake', wake: true }, 'j').kind, 'wake');
    assert.equal(parseRunJob({ ...job, kind: 'timer' }, 'j').kind, 'recover');
    assert.equal(parseRunJob(job, 'j').kind, undefined, "an earlier release's job has none");
    assert.equal(parseRunJob({ ...job, kind: 'enqueue', redispatchOf: 'stuck-id' }, 'j').redispatchOf, 'stuck-id');
    assert.throws(() => parseRunJob({ runId: 'r' }, 'j'), withCode('INVALID_JOB'));
    assert.throws(() => parseRunJob(null, 'j'), withCode('INVALID_JOB'));
  });
});
