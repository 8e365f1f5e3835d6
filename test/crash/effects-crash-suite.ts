import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { killLiveChildren } from '../helpers/child-process';
import { EffectsBench, namedCases, runSeries, type EffectsBackend } from './effects-harness';
import { inPool } from './harness';

/** Two children at a time: the machine's cores, shared with the rest of the suite. */
const JOBS = 2;

/**
 * Exactly-once side effects under SIGKILL, written once and run per backend
 * (test/crash/effects-<backend>.test.ts): the effects pipeline runs in child processes that are killed at
 * named fault points and at seeded random points, and resumed until they complete; then every guarantee
 * is checked (see verifyRun). `npm run crash-test` runs the long series.
 */
export function defineEffectsCrashSuite(backend: EffectsBackend, random: { runs: number; seed: number; label?: string; timeoutMs?: number }): void {
  describe(`exactly-once side effects under SIGKILL on ${backend.name}${random.label ?? ''}`, { timeout: random.timeoutMs ?? 120_000 }, () => {
    let bench: EffectsBench;
    before(async () => {
      bench = await EffectsBench.open(backend, `effects-crash ${backend.name}${random.label ?? ''}`);
    });
    after(async () => {
      await killLiveChildren();
      await bench?.close();
    });

    it('kills at each named fault point (effects of every kind, steps of every kind) and resumes to the uninterrupted result', async () => {
      await inPool(namedCases('representative'), JOBS, async (named) => {
        const runId = `named-${named.spec.replace('@', '-')}`;
        const log = await bench.execute(runId, [{ kind: 'fault', spec: named.spec }]);
        assert.equal(log.processes[0].killed, true, `${named.spec} did not kill the worker: ${JSON.stringify(log)}`);
        assert.equal(log.processes.length, 2, `${runId}: one kill, one resume`);
        const report = await bench.verify(log);
        assert.deepEqual(report.violations, []);
        assert.equal(report.lostSteps, 0);
        assert.equal(report.duplicateTransactional, 0);
        assert.equal(report.externalRepeats.betweenEffectAndRecord, named.externalRepeats, `${named.spec}: external repeats`);
        assert.deepEqual(report.reconciled, named.reconciled ?? { found: 0, notFound: 0 }, `${named.spec}: reconcile answers`);
      });
    });

    it(`kills at seeded random points (seed ${random.seed}, ${random.runs} runs) and resumes until complete`, async () => {
      const totals = await runSeries(bench, { runs: random.runs, seed: random.seed, maxKills: 2, jobs: JOBS });
      assert.deepEqual(totals.violations, []);
      assert.equal(totals.runs, random.runs);
      assert.ok(totals.kills > 0, 'the series killed workers');
      assert.equal(totals.lostSteps, 0);
      assert.equal(totals.duplicateTransactional, 0);
      assert.equal(totals.externalRepeats.other, 0);
    });
  });
}
