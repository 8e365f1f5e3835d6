import { strict as assert } from 'node:assert';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { killLiveChildren, waitFor } from '../helpers/child-process';
import { PAUSED_EXIT, withBench, type LifecycleBackend, type LifecycleBench } from './bench';
import { STEP_KEYS, stepsOf } from './pipeline';

const [FETCH, CRUNCH, PUBLISH] = STEP_KEYS as [string, string, string];

/**
 * Graceful shutdown with real signals, written once and run per backend (sqlite.test.ts,
 * postgres.test.ts): a worker process runs the lifecycle pipeline under `runUntilSignal` and gets a
 * SIGTERM while its long step runs (honouring, finishing, ignoring its abort signal) or while its
 * checkpoint write is blocked inside the database; a new process resumes, and the execution log shows
 * exactly which steps ran where.
 */
export function defineShutdownSuite(backend: LifecycleBackend): void {
  describe(`graceful shutdown on ${backend.name} (real SIGTERM to a worker process)`, { timeout: 180_000 }, () => {
    after(killLiveChildren);
    const bench = (name: string, fn: (b: LifecycleBench) => Promise<void>) => withBench(backend, name, fn, killLiveChildren);

    it('SIGTERM in a step that honours its abort signal: paused (exit 75), handlers removed, the step re-runs on resume', () =>
      bench('honour', async (b) => {
        const runId = 'honour';
        const child = b.run(runId, { steps: { mode: 'honour', ms: 30_000 }, hostHandler: true });
        await b.waitForEvent(child, CRUNCH, 'start');
        const sentAt = Date.now();
        child.process.kill('SIGTERM');
        const { exit, out } = await b.outcome(child);
        const took = Date.now() - sentAt;
        assert.equal(exit.code, PAUSED_EXIT, exit.stderr);
        assert.ok(took < 3_000, `a step that honours the signal stops at once, not after its 5 s grace (exited ${took} ms after SIGTERM)`);
        assert.equal(out.result?.status, 'paused');
        assert.equal(out.result?.lastSequence, 1);
        assert.deepEqual(out.listeners, { before: { SIGTERM: 1, SIGINT: 0 }, after: { SIGTERM: 1, SIGINT: 0 } }, 'only the host handler is left');
        assert.ok(
          b.events().some((e) => e.pid === child.pid && e.event === 'host-sigterm'),
          "the host application's own handler still ran",
        );
        assert.deepEqual(stepsOf(b.events(), child.pid, 'aborted'), [CRUNCH], 'the step saw its abort signal');
        assert.match(exit.stderr, new RegExp(`waypoint: run '${runId}' paused after SIGTERM at sequence 1; safe to restart`));

        const info = (await b.reader.get(runId))!;
        assert.equal(info.status, 'paused');
        assert.equal(info.leaseOwner, null, 'the lease is released');
        assert.match(info.resumeHint ?? '', new RegExp(`step '${CRUNCH}' was not completed and runs again on resume`));
        assert.deepEqual(await b.recorded(runId), [FETCH]);

        const resumed = await b.complete(runId);
        assert.deepEqual([resumed.result.stepsSkipped, resumed.result.stepsExecuted], [1, 2]);
        assert.deepEqual(stepsOf(b.events(), resumed.pid), [CRUNCH, PUBLISH], 'exactly the interrupted step and the rest ran again');
        assert.deepEqual(await b.recorded(runId), STEP_KEYS);
        const checkpoint = await b.reader.checkpoint(runId);
        assert.deepEqual(checkpoint.agent_memory_snapshots.Cruncher, { runs: 1 }, "the abandoned attempt's memory change was not kept");
        // Last, so that the checks above run even while this one fails.
        assert.match(info.resumeHint ?? '', /SIGTERM/, `the hint names the signal: ${info.resumeHint}`);
      }));

    it('SIGTERM in a step that finishes within the grace period: its result is checkpointed and not run again', () =>
      bench('finish', async (b) => {
        const runId = 'finish';
        const child = b.run(runId, { steps: { mode: 'finish', ms: 30_000, finishMs: 150 } });
        await b.waitForEvent(child, CRUNCH, 'start');
        child.process.kill('SIGTERM');
        const { exit, out } = await b.outcome(child);
        assert.equal(exit.code, PAUSED_EXIT, exit.stderr);
        assert.equal(out.result?.status, 'paused');
        assert.equal(out.result?.lastSequence, 2, 'the step that finished in its grace period was recorded');
        assert.deepEqual(out.listeners?.after, { SIGTERM: 0, SIGINT: 0 });
        assert.deepEqual(stepsOf(b.events(), child.pid, 'end'), [FETCH, CRUNCH]);
        assert.deepEqual(await b.recorded(runId), [FETCH, CRUNCH]);
        const resumed = await b.complete(runId);
        assert.deepEqual(stepsOf(b.events(), resumed.pid), [PUBLISH], 'only the step after the pause runs');
        assert.deepEqual(resumed.result.state, { topic: 'lifecycle', fetched: runId, crunched: true, published: true });
      }));

    it('SIGTERM in a step that ignores it: abandoned after the grace period, not recorded, the process exits promptly with 75', () =>
      bench('ignore', async (b) => {
        const runId = 'ignore';
        const graceMs = 300;
        const child = b.run(runId, { steps: { mode: 'ignore', ms: 6_000 }, gracePeriodMs: graceMs });
        await b.waitForEvent(child, CRUNCH, 'start');
        const sentAt = Date.now();
        child.process.kill('SIGTERM');
        await waitFor(() => /safe to restart/.test(child.stderr()), { what: 'the pause to be reported', child, timeoutMs: 5_000 });
        const pausedAfter = Date.now() - sentAt;
        assert.ok(pausedAfter >= graceMs - 20, `the step got its grace period (${pausedAfter} ms)`);
        assert.equal((await b.reader.get(runId))?.status, 'paused');
        const { exit, out } = await b.outcome(child);
        const exitedAfter = Date.now() - sentAt;
        assert.equal(exit.code, PAUSED_EXIT, exit.stderr);
        assert.equal(out.result?.status, 'paused');
        assert.equal(out.result?.lastSequence, 1);
        assert.deepEqual(out.listeners?.after, { SIGTERM: 0, SIGINT: 0 });
        assert.deepEqual(stepsOf(b.events(), child.pid, 'abort-ignored'), [CRUNCH]);
        assert.match(exit.stderr, /run paused/);
        const info = (await b.reader.get(runId))!;
        assert.match(info.resumeHint ?? '', new RegExp(`step '${CRUNCH}' was not completed and runs again on resume`));
        assert.deepEqual(await b.recorded(runId), [FETCH], 'the abandoned step is not recorded');

        const resumed = await b.complete(runId);
        assert.deepEqual(stepsOf(b.events(), resumed.pid), [CRUNCH, PUBLISH]);
        assert.deepEqual(await b.recorded(runId), STEP_KEYS);
        // Last, so that the checks above run even while this one fails.
        assert.ok(
          exitedAfter < graceMs + 2_000,
          `the process exits promptly after the pause, not when the abandoned step ends (exited ${exitedAfter} ms after SIGTERM; the step runs 6000 ms)`,
        );
      }));

    it('SIGTERM while the checkpoint write is blocked in the database: the write commits whole, then the run pauses', () =>
      bench('write-term', async (b) => {
        const runId = 'write-term';
        const gate = join(b.dir, 'gate');
        const child = b.run(runId, { steps: { mode: 'gate', ms: 0, gate } });
        await b.waitForEvent(child, CRUNCH, 'start');
        const lock = await b.db.lockRun(runId);
        try {
          b.openGate(gate);
          await b.waitForEvent(child, CRUNCH, 'end');
          await waitUntilBlocked(lock);
          child.process.kill('SIGTERM');
          await pause(300);
          assert.equal(child.exitedYet(), false, 'the worker waits for its write');
          assert.equal((await b.reader.get(runId))?.lastSequence, 1, 'nothing of the blocked write is visible');
        } finally {
          await lock.release();
        }
        const { exit, out } = await b.outcome(child);
        assert.equal(exit.code, PAUSED_EXIT, exit.stderr);
        assert.equal(out.result?.status, 'paused');
        assert.equal(out.result?.lastSequence, 2, 'the in-flight checkpoint was completed before pausing');
        assert.deepEqual(await b.recorded(runId), [FETCH, CRUNCH]);
        const info = (await b.reader.get(runId))!;
        assert.deepEqual([info.status, info.cursor], ['paused', { agentIndex: 2, stepIndex: 0 }], 'cursor and row moved together');
        const resumed = await b.complete(runId);
        assert.deepEqual(stepsOf(b.events(), resumed.pid), [PUBLISH]);
        assert.deepEqual(await b.recorded(runId), STEP_KEYS);
      }));

    it('SIGKILL while the checkpoint write is blocked: the step is either wholly recorded or not at all, and the resume matches', (t) =>
      bench('write-kill', async (b) => {
        const runId = 'write-kill';
        const gate = join(b.dir, 'gate');
        const child = b.run(runId, { steps: { mode: 'gate', ms: 0, gate } });
        await b.waitForEvent(child, CRUNCH, 'start');
        const lock = await b.db.lockRun(runId);
        try {
          b.openGate(gate);
          await b.waitForEvent(child, CRUNCH, 'end');
          await waitUntilBlocked(lock);
          assert.equal((await child.kill('SIGKILL')).signal, 'SIGKILL');
        } finally {
          await lock.release();
        }
        // PostgreSQL may still run the statement of a dead client once the lock is free; SQLite cannot.
        // One snapshot of run row and step rows: they must agree.
        const { run, steps } = (await b.reader.store.loadRun(runId))!;
        const keys = steps.map((s) => `${s.agentId}/${s.stepName}`);
        const committed = run.lastSequence === 2;
        t.diagnostic(`the dead worker's blocked checkpoint write ${committed ? 'committed once the lock was free' : 'never committed'}`);
        if (committed) {
          assert.deepEqual(keys, [FETCH, CRUNCH]);
          assert.deepEqual([run.cursorAgent, run.cursorStep], [2, 0]);
        } else {
          assert.equal(run.lastSequence, 1);
          assert.deepEqual(keys, [FETCH], 'no half-written step row');
          assert.deepEqual([run.cursorAgent, run.cursorStep], [1, 0]);
        }
        const resumed = await b.complete(runId);
        assert.deepEqual(stepsOf(b.events(), resumed.pid), committed ? [PUBLISH] : [CRUNCH, PUBLISH]);
        assert.deepEqual(await b.recorded(runId), STEP_KEYS);
      }));
  });
}

/** Waits until the database shows the worker blocked on the lock (or, where it cannot, gives it time to get there). */
async function waitUntilBlocked(lock: { blockedWriters(): Promise<number | null> }): Promise<void> {
  if ((await lock.blockedWriters()) === null) {
    // SQLite: the worker's append runs synchronously right after the step's last log line, so it is
    // waiting on the busy lock well within this.
    await pause(150);
    return;
  }
  await waitFor(async () => ((await lock.blockedWriters()) ?? 0) > 0, { what: 'the worker to block on the row lock', timeoutMs: 10_000 });
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
