import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { crashTest, type CrashReport } from '../../src/testing/index';
import { ChargeWithClockGuardKey, ChargeWithClockKey, ChargeWithOperationKey, bankModule } from './charge-pipelines';
import { ShipKeyedByItem, ShipKeyedByOrder, warehouseModule } from './ship-pipelines';
import { TicketToolInDurableTools, TicketToolOutsideDurableTools } from './tool-pipelines';
import { observeWorld, steppingNow } from './world';

/** The problem of `kind` at `point` (its message names the step), or a failure listing what was found. */
function problemAt(report: CrashReport, kind: string, point: RegExp) {
  const found = report.problems.find((p) => p.kind === kind && point.test(p.point));
  assert.ok(found, `no ${kind} at ${String(point)}; found:\n${report.summary}`);
  assert.ok(found.message.includes(`'${found.step}'`), found.message);
  return found;
}

describe('crashTest catches pipelines written wrongly on purpose, and passes them written rightly (memory store)', () => {
  let restoreNow: () => void;
  before(() => (restoreNow = steppingNow()));
  after(() => restoreNow());

  it('a charge whose idempotency key holds Date.now(): charged twice after a crash between the charge and its record', async () => {
    const report = await crashTest(ChargeWithClockKey, { input: { amount: 40 }, modules: [bankModule], observe: observeWorld });
    assert.equal(report.ok, false);
    const problem = problemAt(report, 'observed-differs', /^after-effect ClockKeyedCheckout\/pay charge #1$/);
    assert.equal(problem.step, 'ClockKeyedCheckout/pay');
    assert.match(problem.message, /observed 'charges' changed by 2, but by 1/);
  });

  it('Date.now() in the key of guardedExecute: the resumed step finds no record and charges again', async () => {
    const report = await crashTest(ChargeWithClockGuardKey, { input: { amount: 40 }, observe: observeWorld });
    const problem = problemAt(report, 'effect-repeated', /^before-step-row ClockGuardedCheckout\/pay #1$/);
    assert.match(problem.message, /the side effects of step 'ClockGuardedCheckout\/pay' ran 2 times, but 1 times without a crash: a key changed between executions/);
    problemAt(report, 'observed-differs', /^before-step-row ClockGuardedCheckout\/pay #1$/);
  });

  it('the charge keyed by its operation passes at every point', async () => {
    const report = await crashTest(ChargeWithOperationKey, { input: { amount: 40 }, modules: [bankModule], observe: observeWorld });
    assert.ok(report.ok, report.summary);
    assert.equal(report.effects.find((e) => e.operation === 'charge')?.maxPerKey, 2); // the gap: run again, deduplicated by the bank
  });

  it('a tool whose external write is outside durableTools: a resumed step opens a second ticket; no recorded model call is made again', async () => {
    const report = await crashTest(TicketToolOutsideDurableTools, { input: { complaint: 'my refund' }, observe: observeWorld });
    const problem = problemAt(report, 'observed-differs', /^before-step-row TriageUnguardedTool\/triage #1$/);
    assert.match(problem.message, /observed 'tickets' changed by 2, but by 1/);
    // A model call runs again only in the one gap (killed after it answered, before its record): never after it was recorded.
    assert.deepEqual(
      report.problems.filter((p) => p.kind === 'call-repeated' && !p.point.startsWith('after-effect ')),
      [],
    );
  });

  it('the tool inside durableTools passes', async () => {
    const report = await crashTest(TicketToolInDurableTools, { input: { complaint: 'my refund' }, observe: observeWorld });
    assert.ok(report.ok, report.summary);
    assert.ok(
      report.points.some((p) => p.kind === 'after-effect' && p.operation?.includes('openTicket')),
      report.points.map((p) => p.id).join('\n'),
    );
  });

  it('a forEach item whose effect is keyed by the order items ran in, not by the item: a parcel is never shipped after a crash', async () => {
    const report = await crashTest(ShipKeyedByOrder, { input: { parcels: ['a', 'b', 'c'] }, modules: [warehouseModule], observe: observeWorld });
    // Which points show it depends on how the concurrent items interleaved; every one is inside the forEach.
    const problem = problemAt(report, 'observed-differs', /forEach\(shipped\)\[\d\]/);
    assert.match(problem.step, /^forEach\(shipped\)\[\d\]/);
    assert.match(problem.message, /observed 'shipments' changed by 2, but by 3/);
  });

  it('the items keyed by their own operation pass, across the parallel branches and the forEach items', async () => {
    const report = await crashTest(ShipKeyedByItem, { input: { parcels: ['a', 'b', 'c'] }, modules: [warehouseModule], observe: observeWorld });
    assert.ok(report.ok, report.summary);
    const kinds = new Set(report.points.map((p) => p.kind));
    for (const kind of ['before-branch', 'before-item', 'before-effect', 'after-effect', 'effect-recorded', 'before-step-row', 'after-step-row'])
      assert.ok(kinds.has(kind as never), kind);
  });
});
