// The copyable example of docs/testing.md, as it is there (imports pointed at the sources): it must pass.
import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { ContainerModule, inject, injectable } from 'inversify';
import { IsNumber, IsOptional, IsString } from 'class-validator';
import { Agent, Pipeline, SideEffect, Step, currentOperation, type StepContext } from '../../src/index';
import { crashTest, testEnvironment } from '../../src/testing/index';

/** A fake payment provider that, like a real one, charges once per idempotency key. */
const bank = new Map<string, number>();

@injectable()
class Payments {
  @SideEffect({ name: 'charge' })
  charge(amount: number): Promise<void> {
    const key = currentOperation().key; // the same on every resume
    if (!bank.has(key)) bank.set(key, amount);
    return Promise.resolve();
  }
}

class CheckoutState {
  @IsNumber() amount!: number;
  @IsOptional() @IsString() status?: string;
}

@injectable()
class Checkout extends Agent {
  constructor(@inject(Payments) private readonly payments: Payments) {
    super();
  }

  @Step()
  async pay(ctx: StepContext<CheckoutState>) {
    await this.payments.charge(ctx.state.amount);
    await ctx.sleep(24 * 3600_000); // wait a day before shipping
    return { status: 'paid' };
  }
}

@Pipeline({ name: 'checkout', version: '1.0.0', state: CheckoutState, agents: [Checkout] })
class CheckoutPipeline {}

const services = new ContainerModule(({ bind }) => {
  bind(Payments).toSelf();
});

test('the checkout never charges twice, wherever it crashes', async () => {
  const report = await crashTest(CheckoutPipeline, { input: { amount: 40 }, modules: [services], observe: { charges: () => bank.size } });
  assert.ok(report.ok, report.summary);
});

test('the day-long wait takes no wall time', async () => {
  const env = await testEnvironment({ modules: [services] });
  env.start(CheckoutPipeline, { runId: 'order-1', input: { amount: 40 } });
  const result = await env.runUntil('order-1', 'completed');
  assert.equal(result.state.status, 'paid');
  assert.deepEqual(
    (await env.effects('order-1')).map((e) => e.name),
    ['charge', 'waypoint:sleep'],
  );
  await env.close();
});
