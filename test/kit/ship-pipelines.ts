import 'reflect-metadata';
import { IsArray, IsOptional, IsString } from 'class-validator';
import { ContainerModule, inject, injectable } from 'inversify';
import { Agent, Pipeline, SideEffect, Step, currentOperation, forEach, parallel, type StepContext } from '../../src/index';
import { world } from './world';

class ShipState {
  @IsArray() @IsString({ each: true }) parcels!: string[];
  @IsOptional() @IsString() label?: string;
  @IsOptional() @IsString() customs?: string;
  @IsOptional() @IsArray() shipped?: unknown[];
}

/** One warehouse client per process (a singleton in its container), counting what it sent since it started. */
@injectable()
export class Warehouse {
  private sent = 0;

  /** Keyed by the order the items reached this process: not by the item. */
  @SideEffect({ name: 'ship' })
  shipInOrder(runId: string, parcel: string): Promise<string> {
    world.warehouse.write(`${runId}:${this.sent++}`, parcel);
    return Promise.resolve(`sent ${parcel}`);
  }

  /** Keyed by the operation, whose key derives from the item's path in the run. */
  @SideEffect({ name: 'ship' })
  ship(parcel: string): Promise<string> {
    world.warehouse.write(currentOperation().key, parcel);
    return Promise.resolve(`sent ${parcel}`);
  }
}

class Label extends Agent {
  @Step()
  label(ctx: StepContext<ShipState>) {
    return { label: `${ctx.state.parcels.length} parcels` };
  }
}

class Customs extends Agent {
  @Step()
  declare(ctx: StepContext<ShipState>) {
    return { customs: `declared ${ctx.state.parcels.join(',')}` };
  }
}

@injectable()
class ShipInOrder extends Agent {
  constructor(@inject(Warehouse) private readonly warehouse: Warehouse) {
    super();
  }

  @Step()
  async ship(ctx: StepContext<ShipState>) {
    return { label: await this.warehouse.shipInOrder(ctx.runId, ctx.item as string) };
  }
}

@injectable()
class ShipByItem extends Agent {
  constructor(@inject(Warehouse) private readonly warehouse: Warehouse) {
    super();
  }

  @Step()
  async ship(ctx: StepContext<ShipState>) {
    return { label: await this.warehouse.ship(ctx.item as string) };
  }
}

@Pipeline({
  name: 'kit-ship-in-order',
  version: '1.0.0',
  state: ShipState,
  agents: [parallel(Label, Customs), forEach((s: ShipState) => s.parcels, ShipInOrder, { into: 'shipped', concurrency: 2 })],
})
export class ShipKeyedByOrder {}

@Pipeline({
  name: 'kit-ship-by-item',
  version: '1.0.0',
  state: ShipState,
  agents: [parallel(Label, Customs), forEach((s: ShipState) => s.parcels, ShipByItem, { into: 'shipped', concurrency: 2 })],
})
export class ShipKeyedByItem {}

export const warehouseModule = new ContainerModule(({ bind }) => {
  bind(Warehouse).toSelf().inSingletonScope();
});
