import 'reflect-metadata';
import { IsNumber, IsOptional, IsString } from 'class-validator';
import { ContainerModule, inject, injectable } from 'inversify';
import { Agent, Pipeline, SideEffect, Step, currentOperation, guardedExecute, type StepContext } from '../../src/index';
import { world } from './world';

class PaymentState {
  @IsNumber() amount!: number;
  @IsOptional() @IsString() chargeId?: string;
  @IsOptional() @IsString() receipt?: string;
}

@injectable()
export class Bank {
  /** Charges with the key it is given (the caller decides what the bank deduplicates by). */
  @SideEffect({ name: 'charge' })
  chargeWithKey(amount: number, idempotencyKey: string): Promise<string> {
    world.bank.write(idempotencyKey, amount);
    return Promise.resolve(`ch-${idempotencyKey.slice(-6)}`);
  }

  /** Charges with the operation's own key: the same on every resume. */
  @SideEffect({ name: 'charge' })
  charge(amount: number): Promise<string> {
    world.bank.write(currentOperation().key, amount);
    return Promise.resolve(`ch-${currentOperation().key.slice(0, 6)}`);
  }
}

/** Wrong on purpose: the idempotency key the bank gets is built from Date.now(), so a resumed run sends another one. */
@injectable()
class ClockKeyedCheckout extends Agent {
  constructor(@inject(Bank) private readonly bank: Bank) {
    super();
  }

  @Step()
  async pay(ctx: StepContext<PaymentState>) {
    await this.bank.chargeWithKey(ctx.state.amount, `${ctx.runId}-${Date.now()}`);
    return { receipt: 'paid' };
  }
}

/** Wrong on purpose, the plain-function way: Date.now() in the guard's own key, so the resume finds no record of the charge. */
class ClockGuardedCheckout extends Agent {
  @Step()
  async pay(ctx: StepContext<PaymentState>) {
    const id = await guardedExecute(`charge-${ctx.runId}-${Date.now()}`, () => {
      world.bank.write(currentOperation().key, ctx.state.amount);
      return `ch-${world.bank.count}`;
    });
    return { chargeId: id.slice(0, 2), receipt: 'paid' };
  }
}

/** Right: the bank deduplicates by the operation key. */
@injectable()
class KeyedCheckout extends Agent {
  constructor(@inject(Bank) private readonly bank: Bank) {
    super();
  }

  @Step()
  async pay(ctx: StepContext<PaymentState>) {
    await this.bank.charge(ctx.state.amount);
    return { receipt: 'paid' };
  }
}

@Pipeline({ name: 'kit-charge-clock-key', version: '1.0.0', state: PaymentState, agents: [ClockKeyedCheckout] })
export class ChargeWithClockKey {}

@Pipeline({ name: 'kit-charge-clock-guard', version: '1.0.0', state: PaymentState, agents: [ClockGuardedCheckout] })
export class ChargeWithClockGuardKey {}

@Pipeline({ name: 'kit-charge-keyed', version: '1.0.0', state: PaymentState, agents: [KeyedCheckout] })
export class ChargeWithOperationKey {}

export const bankModule = new ContainerModule(({ bind }) => {
  bind(Bank).toSelf();
});
