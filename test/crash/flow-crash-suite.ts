import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { killLiveChildren } from '../helpers/child-process';
import type { EffectsBackend } from './effects-harness';
import { FlowBench, describeTrial, runFlowSeries } from './flow-harness';

/**
 * Control flow under SIGKILL, written once and run per backend (test/crash/flow-<backend>.test.ts): the
 * control-flow pipeline (parallel, loop, branch, forEach over an agent and over a child pipeline, when,
 * a reducer, a booking per item) runs in child processes killed at seeded random delays, several times
 * per trial, and resumed in a new process each time until it completes. Then every step path and every
 * decision must be recorded exactly once, every booking be in the ledger exactly once, the child runs be
 * complete and listed under the parent, and the state equal an uncrashed run's (see verifyFlow).
 * `npm run crash-test -- --pipeline flow` runs the long series.
 */
export function defineFlowCrashSuite(backend: EffectsBackend, series: { trials: number; seed: number; maxKills: number; jobs?: number; label?: string }): void {
  describe(`control flow under SIGKILL on ${backend.name}${series.label ?? ''}`, { timeout: 120_000 }, () => {
    let bench: FlowBench;
    before(async () => {
      bench = await FlowBench.open(backend, `flow-crash ${backend.name}${series.label ?? ''}`);
    });
    after(async () => {
      await killLiveChildren();
      await bench?.close();
    });

    it(`kills each trial's workers at seeded random delays (seed ${series.seed}, ${series.trials} trials) and resumes to the uncrashed result`, async () => {
      const trials = await runFlowSeries(bench, { trials: series.trials, seed: series.seed, jobs: series.jobs ?? 2, minKills: 2, maxKills: series.maxKills });
      // The reproduction of every failed trial: its seed, the kill delays and where each kill landed.
      const failed = trials.filter((t) => t.violations.length > 0).map((t) => `${describeTrial(t)}\n  ${t.violations.join('\n  ')}`);
      assert.deepEqual(failed, [], `trials that broke a guarantee:\n${failed.join('\n')}`);
      assert.equal(trials.length, series.trials);
      const kills = trials.reduce((n, t) => n + t.processes.filter((p) => p.killed).length, 0);
      assert.ok(kills >= series.trials, `the trials killed ${kills} workers: too few to test anything`);
    });

    it('kills workers while the child runs are in flight (after 1 and 6 child rows) and resumes to the uncrashed result', async () => {
      const trial = await bench.execute('children', series.seed, [{ childRows: 1 }, { childRows: 6 }]);
      assert.deepEqual(trial.violations, [], describeTrial(trial));
      assert.deepEqual(
        trial.processes.map((p) => p.killed),
        [true, true, false],
        describeTrial(trial),
      );
      // Each kill came once the child rows it waited for were written (polling may land it a row or two later).
      for (const [i, rows] of [1, 6].entries()) {
        const p = trial.processes[i];
        assert.ok(p.childRows >= rows, `kill ${i + 1} landed at ${p.childRows} child rows: ${describeTrial(trial)}`);
      }
    });
  });
}
