import { expect, test } from '@jest/globals';
import { crashTest } from 'waypoint-durable/testing';
import { Refund, refunds, services } from './refund-pipeline';

test('crash-tests the refund pipeline under jest with @swc/jest', async () => {
  const report = await crashTest(Refund, { input: { amount: 25 }, modules: [services], observe: { refunds: () => refunds.size } });
  expect(report.summary).toBe(`crashTest: ${report.points.length} crash points, no problem.`);
  expect(report.ok).toBe(true);
});
