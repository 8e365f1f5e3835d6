import 'reflect-metadata';
import { IsOptional, IsString } from 'class-validator';
import { ContainerModule, inject, injectable } from 'inversify';
import { Agent, Pipeline, SideEffect, Step, currentOperation, type StepContext } from '../../src/index';
import { world } from './world';

class OrderState {
  @IsString() orderId!: string;
  @IsOptional() @IsString() confirmation?: string;
  @IsOptional() @IsString() receipt?: string;
}

@injectable()
export class Mailer {
  @SideEffect({ name: 'send-email' })
  send(to: string, body: string): Promise<string> {
    world.outbox.write(currentOperation().key, `${to}: ${body}`);
    return Promise.resolve(`mail-${world.outbox.count}`);
  }
}

class Confirm extends Agent {
  @Step()
  confirm(ctx: StepContext<OrderState>) {
    return { confirmation: `confirmed ${ctx.state.orderId}` };
  }
}

/** Wrong on purpose: the email goes out from a plain @Step, outside the side-effect guard. */
class NotifyPlain extends Agent {
  @Step()
  notify(ctx: StepContext<OrderState>) {
    world.outbox.write(`mail-${world.outbox.calls}`, `customer: ${ctx.state.confirmation}`);
    return { receipt: 'sent' };
  }
}

/** Right: the email goes out through a @SideEffect that passes its operation key to the provider. */
@injectable()
class NotifyGuarded extends Agent {
  constructor(@inject(Mailer) private readonly mailer: Mailer) {
    super();
  }

  @Step()
  async notify(ctx: StepContext<OrderState>) {
    await this.mailer.send('customer', ctx.state.confirmation ?? '');
    return { receipt: 'sent' };
  }
}

@Pipeline({ name: 'kit-email-wrong', version: '1.0.0', state: OrderState, agents: [Confirm, NotifyPlain] })
export class EmailFromPlainStep {}

@Pipeline({ name: 'kit-email-right', version: '1.0.0', state: OrderState, agents: [Confirm, NotifyGuarded] })
export class EmailFromSideEffect {}

export const mailerModule = new ContainerModule(({ bind }) => {
  bind(Mailer).toSelf();
});
