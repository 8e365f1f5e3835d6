// The pipeline the runner projects crash-test, as a user would write it: an agent that takes a service by
// type (constructor injection, which needs decorator metadata) and refunds through a @SideEffect.
import 'reflect-metadata';
import { IsNumber, IsOptional, IsString } from 'class-validator';
import { ContainerModule, injectable } from 'inversify';
import { Agent, Pipeline, SideEffect, Step, currentOperation, type StepContext } from 'waypoint-durable';

/** The payment provider: one refund per idempotency key. */
export const refunds = new Map<string, number>();

@injectable()
export class Payments {
  @SideEffect({ name: 'refund' })
  refund(amount: number): Promise<string> {
    const key = currentOperation().key;
    if (!refunds.has(key)) refunds.set(key, amount);
    return Promise.resolve(`refund ${key}`);
  }
}

class RefundState {
  @IsNumber() amount!: number;
  @IsOptional() @IsString() refundId?: string;
}

@injectable()
class Refunder extends Agent {
  constructor(private readonly payments: Payments) {
    super();
  }

  @Step()
  async refund(ctx: StepContext<RefundState>) {
    return { refundId: await this.payments.refund(ctx.state.amount) };
  }
}

@Pipeline({ name: 'runner-refund', version: '1.0.0', state: RefundState, agents: [Refunder] })
export class Refund {}

export const services = new ContainerModule(({ bind }) => {
  bind(Payments).toSelf();
});
