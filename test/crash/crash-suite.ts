import { strict as assert } from 'node:assert';
import { availableParallelism } from 'node:os';
import { after, describe, it } from 'node:test';
import { readCallLog } from '../../examples/financial-analysis/llm';
import type { RunResult } from '../../src/index';
import { killLiveChildren, lastJsonLine, waitFor } from '../helpers/child-process';
import { CrashBench, inPool, type CrashBackend } from './harness';

const PARALLEL = Math.max(2, availableParallelism());

/**
 * The crash suite, written once and run against each backend (test/crash/<backend>.test.ts): the
 * financial-analysis example runs in real child processes that are killed (SIGKILL, and SIGTERM for the
 * graceful pause) at chosen points, then resumed in new processes until the run completes. Exact kill points come from the runtime's fault
 * points (step boundaries, side-effect edges) and from the fake LLM holding one call open (inside a
 * step), so no assertion depends on timing.
 */
export function defineCrashSuite(backend: CrashBackend): void {
  // The timeout only guards against a hang: the suite takes 50-90 s, and more on a machine running
  // other test processes, where 120 s was once too short.
  describe(`crash recovery on ${backend.name} (child processes killed with SIGKILL / SIGTERM)`, { timeout: 360_000 }, () => {
    after(killLiveChildren);

    async function withBench(name: string, fn: (bench: CrashBench) => Promise<void>): Promise<void> {
      const bench = await CrashBench.open(backend, `${backend.name} ${name}`);
      try {
        await fn(bench);
      } finally {
        await killLiveChildren();
        await bench.close();
      }
    }

    it('kills at every step boundary (after-checkpoint-before-next-step@N) and resumes to the uninterrupted result', () =>
      withBench('boundaries', async (bench) => {
        const total = bench.keys.length;
        // One run per boundary, so each run dies exactly once at a known point; runs go in parallel.
        await inPool(
          Array.from({ length: total }, (_, i) => i + 1),
          PARALLEL,
          async (n) => {
            const runId = `boundary-${n}`;
            const crashed = await bench.spawn(runId, { WAYPOINT_FAULT: `after-checkpoint-before-next-step@${n}` }).exited;
            await bench.assertKilledAt(runId, crashed, n);
            const result = await bench.complete(runId);
            assert.equal(result.resumed, true);
            assert.equal(result.stepsSkipped, n, `${runId}: steps skipped on resume`);
            assert.equal(result.stepsExecuted, total - n, `${runId}: steps run after the crash`);
            await bench.assertRecovered(runId, result, {});
          },
        );
      }));

    it('kills inside every step while its LLM call is in flight, one run crashed once per step', () =>
      withBench('in-flight', async (bench) => {
        const runId = 'in-flight';
        const log = bench.logPath(runId);
        for (const [index, tag] of bench.keys.entries()) {
          // Each new process first re-runs the step the previous one died in, then holds the next call.
          const child = bench.spawn(runId, { WAYPOINT_LLM_HOLD: tag });
          await waitFor(() => readCallLog(log).some((c) => c.pid === child.pid && c.tag === tag && c.event === 'start'), {
            what: `the LLM call of ${tag} to start`,
            child,
          });
          await bench.assertKilledAt(runId, await child.kill('SIGKILL'), index);
        }
        const result = await bench.complete(runId);
        assert.equal(result.stepsSkipped, bench.keys.length - 1);
        assert.equal(result.stepsExecuted, 1);
        await bench.assertRecovered(runId, result, { interrupted: bench.keys.map((tag) => ({ tag, callFinished: false })) });
      }));

    it('kills around the report email (before-effect, after-effect-before-record, after-record-before-checkpoint): delivered once', () =>
      withBench('side-effect', async (bench) => {
        const last = bench.keys[bench.keys.length - 1];
        const cases = [
          // Began, not sent: the resume sends it (second attempt of the same operation).
          { fault: 'before-effect@1', sendAttempts: 2, deduplicatedSends: 0 },
          // Sent, not recorded: the resume sends again with the same idempotency key; the provider dedups.
          { fault: 'after-effect-before-record@1', sendAttempts: 2, deduplicatedSends: 1 },
          // Sent and recorded, step not checkpointed: the step re-runs and the send returns the recorded result.
          { fault: `after-record-before-checkpoint@${bench.keys.length}`, sendAttempts: 1, deduplicatedSends: 0 },
        ];
        await inPool(cases, PARALLEL, async ({ fault, sendAttempts, deduplicatedSends }) => {
          const runId = `effect-${fault.split('@')[0]}`;
          const crashed = await bench.spawn(runId, { WAYPOINT_FAULT: fault }).exited;
          await bench.assertKilledAt(runId, crashed, bench.keys.length - 1);
          const result = await bench.complete(runId);
          assert.equal(result.stepsExecuted, 1, `${runId}: only the interrupted step runs again`);
          await bench.assertRecovered(runId, result, { interrupted: [{ tag: last, callFinished: true }], sendAttempts, deduplicatedSends });
        });
      }));

    it('pauses at the step boundary on SIGTERM (the in-flight call is aborted, not recorded) and resumes', () =>
      withBench('sigterm', async (bench) => {
        const runId = 'sigterm';
        const tag = bench.keys[5];
        const child = bench.spawn(runId, { WAYPOINT_LLM_HOLD: tag });
        const log = bench.logPath(runId);
        await waitFor(() => readCallLog(log).some((c) => c.tag === tag && c.event === 'start'), { what: `the LLM call of ${tag} to start`, child });
        const stopped = await child.kill('SIGTERM');
        assert.equal(stopped.code, 0, stopped.stderr);
        const paused = lastJsonLine<RunResult>(stopped);
        assert.equal(paused.status, 'paused');
        assert.equal(paused.lastSequence, 5);
        assert.equal((await bench.reader.get(runId))?.status, 'paused');
        assert.ok(
          readCallLog(log).some((c) => c.tag === tag && c.event === 'aborted'),
          'the step got its abort signal',
        );
        const result = await bench.complete(runId);
        assert.equal(result.stepsSkipped, 5);
        await bench.assertRecovered(runId, result, { interrupted: [{ tag, callFinished: false }] });
      }));

    it("lets another worker take over a killed worker's run only after its lease expires", () =>
      withBench('takeover', async (bench) => {
        const runId = 'takeover';
        // Long enough that starting the second process (seconds on a loaded machine) cannot outlast it.
        const lease = { WAYPOINT_LEASE_TTL_MS: '10000' };
        const crashed = await bench.spawn(runId, { ...lease, WAYPOINT_WORKER_ID: 'worker-a', WAYPOINT_FAULT: 'after-checkpoint-before-next-step@4' }).exited;
        await bench.assertKilledAt(runId, crashed, 4);
        // The dead worker's lease is still live: a different worker that will not wait is refused.
        const refused = await bench.spawn(runId, { ...lease, WAYPOINT_WORKER_ID: 'worker-b', WAYPOINT_WAIT_FOR_LOCK_MS: '0' }).exited;
        assert.equal(refused.code, 1);
        assert.match(refused.lines.at(-1) ?? '', /"code":"RUN_LOCKED"/);
        assert.equal((await bench.reader.get(runId))?.lastSequence, 4, 'a refused worker changes nothing');
        const result = await bench.complete(runId, { ...lease, WAYPOINT_WORKER_ID: 'worker-b', WAYPOINT_WAIT_FOR_LOCK_MS: '30000' });
        assert.equal(result.stepsSkipped, 4);
        await bench.assertRecovered(runId, result, {});
        assert.equal((await bench.reader.get(runId))?.leaseOwner, null, 'the lease is released at the end');
      }));
  });
}
