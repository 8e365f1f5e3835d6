import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { deserialize } from '../../src/index';
import { killLiveChildren, waitFor } from '../helpers/child-process';
import { PAUSED_EXIT, withBench, type LifecycleBackend, type LifecycleBench } from './bench';
import { STEP_KEYS, stepsOf } from './pipeline';

const [FETCH, CRUNCH, PUBLISH] = STEP_KEYS as [string, string, string];

/**
 * Lifecycle calls that cross processes, per backend: cancel a run another process is executing, signal
 * a waiting run from another process, a durable sleep that outlives a SIGKILL, and a failed run resumed
 * by a new process from the failed step.
 */
export function defineCrossProcessSuite(backend: LifecycleBackend): void {
  describe(`cancel, signal, sleep and failure across processes on ${backend.name}`, { timeout: 180_000 }, () => {
    after(killLiveChildren);
    const bench = (name: string, fn: (b: LifecycleBench) => Promise<void>) => withBench(backend, name, fn, killLiveChildren);

    it('cancel from another process stops a live executor at its next heartbeat: RUN_CANCELLED, nothing recorded after, never resumed', () =>
      bench('cancel-heartbeat', async (b) => {
        const runId = 'cancel-heartbeat';
        const worker = b.run(runId, { steps: { mode: 'honour', ms: 30_000 }, heartbeatMs: 100 });
        await b.waitForEvent(worker, CRUNCH, 'start');
        const cancel = await b.outcome(b.spawn('cancel', runId, ['operator request']));
        assert.equal(cancel.exit.code, 0, cancel.exit.stdout);
        assert.equal(cancel.out.info?.status, 'cancelled');
        const cancelledAt = Date.now();

        const { exit, out } = await b.outcome(worker);
        assert.ok(Date.now() - cancelledAt < 2_000, 'the executor noticed within a few heartbeats');
        assert.equal(exit.code, 1);
        assert.equal(out.error?.code, 'RUN_CANCELLED', exit.stdout);
        assert.deepEqual(stepsOf(b.events(), worker.pid, 'aborted'), [CRUNCH], "the running step's signal fired");
        assert.deepEqual(stepsOf(b.events(), worker.pid), [FETCH, CRUNCH], 'no step started after the cancel');
        await assertCancelledForGood(b, runId, [FETCH], /operator request/);
      }));

    it('cancel while a step runs without a heartbeat: its finished result is refused at the fenced write, not recorded', () =>
      bench('cancel-write', async (b) => {
        const runId = 'cancel-write';
        const gate = join(b.dir, 'gate');
        const worker = b.run(runId, { steps: { mode: 'gate', ms: 0, gate } });
        await b.waitForEvent(worker, CRUNCH, 'start');
        assert.equal((await b.outcome(b.spawn('cancel', runId))).out.info?.status, 'cancelled');
        b.openGate(gate);
        const { exit, out } = await b.outcome(worker);
        assert.equal(exit.code, 1);
        assert.equal(out.error?.code, 'RUN_CANCELLED', exit.stdout);
        assert.deepEqual(stepsOf(b.events(), worker.pid, 'end'), [FETCH, CRUNCH], 'the step itself finished');
        await assertCancelledForGood(b, runId, [FETCH], /cancelled by request/);
      }));

    it('a waiting run is signalled from another process, then resumed to completion by a third', () =>
      bench('signal', async (b) => {
        const runId = 'signal';
        const first = await b.outcome(b.run(runId, { steps: { mode: 'wait', ms: 0 } }));
        assert.equal(first.exit.code, PAUSED_EXIT, first.exit.stderr);
        assert.equal(first.out.result?.status, 'waiting');
        const waiting = (await b.reader.get(runId))!;
        assert.deepEqual([waiting.status, waiting.lastSequence, waiting.leaseOwner], ['waiting', 1, null]);
        assert.match(waiting.resumeHint ?? '', /signal 'approval'/);

        const payload = { approved: true, by: 'ops@example.com' };
        const signal = await b.outcome(b.spawn('signal', runId, ['approval', JSON.stringify(payload)]));
        assert.equal(signal.out.delivered, true, signal.exit.stdout);
        const again = await b.outcome(b.spawn('signal', runId, ['approval', JSON.stringify({ approved: false })]));
        assert.equal(again.out.delivered, false, 'the first delivery wins');

        const resumed = await b.complete(runId, { steps: { mode: 'wait', ms: 0 } });
        assert.deepEqual(resumed.result.state.approval, payload);
        assert.deepEqual(stepsOf(b.events(), resumed.pid), [CRUNCH, PUBLISH]);
        assert.deepEqual(await b.recorded(runId), STEP_KEYS);
      }));

    it('a holding executor picks up a signal sent from another process without exiting', () =>
      bench('signal-hold', async (b) => {
        const runId = 'signal-hold';
        const worker = b.run(runId, { steps: { mode: 'wait', ms: 0, holdMs: 20_000 } });
        await b.waitForEvent(worker, CRUNCH, 'start');
        assert.equal((await b.reader.get(runId))?.status, 'running', 'holding: still running, not waiting');
        const signal = await b.outcome(b.spawn('signal', runId, ['approval', '"yes"']));
        assert.equal(signal.out.delivered, true);
        const sentAt = Date.now();
        const { exit, out } = await b.outcome(worker);
        assert.ok(Date.now() - sentAt < 2_000, 'picked up within a few polls');
        assert.equal(exit.code, 0, exit.stderr);
        assert.equal(out.result?.state.approval, 'yes');
        assert.deepEqual(stepsOf(b.events(), worker.pid), STEP_KEYS, 'one process, every step once');
      }));

    it('a durable sleep survives SIGKILL: the resumed step sleeps only the remainder and never wakes early', () =>
      bench('sleep', async (b) => {
        const runId = 'sleep';
        const sleepMs = 1_200;
        const worker = b.run(runId, { steps: { mode: 'sleep', ms: sleepMs } });
        await b.waitForEvent(worker, CRUNCH, 'start');
        let wakeAt = 0;
        await waitFor(
          async () => {
            const op = (await b.reader.store.listOperations(runId)).find((o) => o.name === 'waypoint:sleep' && o.state === 'committed');
            wakeAt = op ? deserialize<number>(op.result!) : 0;
            return op !== undefined;
          },
          { what: 'the wake-up time to be recorded', child: worker },
        );
        await new Promise((resolve) => setTimeout(resolve, 200));
        assert.equal((await worker.kill('SIGKILL')).signal, 'SIGKILL');
        assert.deepEqual(await b.recorded(runId), [FETCH]);

        const resumed = await b.complete(runId, { steps: { mode: 'sleep', ms: sleepMs } });
        const start = b.events().find((e) => e.pid === resumed.pid && e.step === CRUNCH && e.event === 'start')!;
        const end = b.events().find((e) => e.pid === resumed.pid && e.step === CRUNCH && e.event === 'end')!;
        assert.ok(end.at >= wakeAt - 2, `woke at ${end.at}, not before the recorded ${wakeAt}`);
        assert.ok(end.at - start.at < sleepMs - 150, `slept ${end.at - start.at} ms of ${sleepMs}: only the remainder`);
        const due = Math.max(wakeAt, start.at);
        assert.ok(end.at - due < 300, `woke ${end.at - due} ms after it was due (recorded ${wakeAt}, step restarted ${start.at})`);
        assert.deepEqual(stepsOf(b.events(), resumed.pid), [CRUNCH, PUBLISH]);
      }));

    it('a step that exhausts its retries fails the run (typed error, every attempt recorded); a new process resumes from that step', () =>
      bench('failed', async (b) => {
        const runId = 'failed';
        const { exit, out } = await b.outcome(b.run(runId, { steps: { mode: 'fail', ms: 99 } }));
        assert.equal(exit.code, 1);
        assert.equal(out.error?.code, 'STEP_FAILED', exit.stdout);
        const info = (await b.reader.get(runId))!;
        assert.equal(info.status, 'failed');
        assert.deepEqual(info.error, {
          name: 'StepFailedError',
          code: 'STEP_FAILED',
          message: `Step '${CRUNCH}' of run '${runId}' failed after 3 attempt(s): crunch failure 3. Fix the cause and call waypoint.resume('${runId}') to retry from this step.`,
        });
        const attempts = (await b.reader.store.listOperations(runId)).filter((o) => o.name.startsWith('attempt:'));
        assert.deepEqual(
          attempts.map((o) => [o.name, o.stepKey, o.state, deserialize<{ message: string }>(o.error!).message]).sort(),
          [1, 2, 3].map((n) => [`attempt:${n}`, CRUNCH, 'failed', `crunch failure ${n}`]),
        );
        assert.deepEqual(await b.recorded(runId), [FETCH]);

        const resumed = await b.complete(runId, { steps: { mode: 'fail', ms: 0 } });
        assert.deepEqual(stepsOf(b.events(), resumed.pid), [CRUNCH, PUBLISH], 'the resume retried from the failed step');
        assert.equal((await b.reader.get(runId))?.error, null, 'the stored error is cleared');
      }));
  });
}

/** The run is cancelled with its hint, only `recorded` steps exist, and neither run nor signal revives it. */
async function assertCancelledForGood(b: LifecycleBench, runId: string, recorded: string[], hint: RegExp): Promise<void> {
  const info = (await b.reader.get(runId))!;
  assert.deepEqual([info.status, info.leaseOwner], ['cancelled', null]);
  assert.match(info.resumeHint ?? '', hint);
  assert.deepEqual(await b.recorded(runId), recorded);
  const ops = await b.reader.store.listOperations(runId);
  assert.deepEqual(
    ops.filter((o) => o.updatedAt.getTime() > info.updatedAt.getTime()),
    [],
    'no operation written after the cancel',
  );

  const again = b.run(runId, { steps: { mode: 'honour', ms: 10 } });
  const { exit, out } = await b.outcome(again);
  assert.equal(exit.code, 1);
  assert.equal(out.error?.code, 'RUN_CANCELLED');
  assert.deepEqual(stepsOf(b.events(), again.pid), [], 'a cancelled run never runs a step again');
  const signal = await b.outcome(b.spawn('signal', runId, ['approval', 'true']));
  assert.equal(signal.out.error?.code, 'RUN_FINISHED');
  assert.equal((await b.reader.get(runId))?.status, 'cancelled');
}
