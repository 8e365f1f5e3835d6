import { expect, it } from 'vitest';
import { crashTest } from 'waypoint-durable/testing';
import { Refund, refunds, services } from './refund-pipeline';

// Run with vitest.swc.config.mjs: swc compiles this file and the pipeline with decorator metadata.
it('crash-tests the refund pipeline under vitest with unplugin-swc', async () => {
  const report = await crashTest(Refund, { input: { amount: 25 }, modules: [services], observe: { refunds: () => refunds.size } });
  expect(report.summary).toBe(`crashTest: ${report.points.length} crash points, no problem.`);
  expect(report.ok).toBe(true);
  expect(report.points.length).toBeGreaterThan(3);
});
