import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { crashTest } from '../../src/testing/index';
import { EmailFromPlainStep, EmailFromSideEffect, mailerModule } from './email-pipelines';
import { ShipKeyedByItem, ShipKeyedByOrder, warehouseModule } from './ship-pipelines';
import { observeWorld } from './world';

/** The wrong and right email and forEach pipelines crash-tested on a user's own store (`storage`). */
export function kitOnStore(storage: ContainerModule, orderId: string): void {
  it('catches the email from a plain @Step and passes the @SideEffect one (straight line)', async () => {
    const wrong = await crashTest(EmailFromPlainStep, { input: { orderId }, modules: [storage, mailerModule], observe: observeWorld });
    const problem = wrong.problems.find((p) => p.kind === 'observed-differs');
    assert.equal(problem?.point, 'before-step-row NotifyPlain/notify #1', wrong.summary);
    const right = await crashTest(EmailFromSideEffect, { input: { orderId }, modules: [storage, mailerModule], observe: observeWorld });
    assert.ok(right.ok, right.summary);
  });

  it('catches forEach items keyed by their order and passes items keyed by their operation (control flow)', async () => {
    const wrong = await crashTest(ShipKeyedByOrder, { input: { parcels: ['a', 'b', 'c'] }, modules: [storage, warehouseModule], observe: observeWorld });
    assert.ok(
      wrong.problems.some((p) => p.kind === 'observed-differs' && p.step.startsWith('forEach(shipped)[')),
      wrong.summary,
    );
    const right = await crashTest(ShipKeyedByItem, { input: { parcels: ['a', 'b', 'c'] }, modules: [storage, warehouseModule], observe: observeWorld });
    assert.ok(right.ok, right.summary);
    assert.ok(right.points.every((p) => p.reached));
  });
}
