import 'reflect-metadata';
import { IsArray, IsInt, IsOptional } from 'class-validator';
import { inject, injectable } from 'inversify';
import { Agent, Pipeline, Reducer, Step, forEach, type StepContext } from '../../src/index';
import { FLEET_ENV, type FleetEnv } from './fleet-pipeline';

/** Items whose `fail` no longer fails (in this process): the user fixed the cause before retrying the item. */
export const HEALED = new Set<number>();

/** A child run of the fan-out tests: one item. `fail` makes its second step throw (for onItemError). */
export class ItemState {
  @IsInt()
  n!: number;

  @IsOptional()
  fail?: boolean;

  @IsOptional()
  @IsInt()
  doubled?: number;

  @IsOptional()
  @IsInt()
  checked?: number;

  /** ms the first step of this item takes on top of the usual. */
  @IsOptional()
  @IsInt()
  slow?: number;
}

@injectable()
export class DoubleAgent extends Agent {
  constructor(@inject(FLEET_ENV) private readonly env: FleetEnv) {
    super();
  }

  @Step()
  async double(ctx: StepContext<ItemState>) {
    if (ctx.state.slow) await new Promise((resolve) => setTimeout(resolve, ctx.state.slow));
    return this.env.step(ctx, () => ({ doubled: ctx.state.n * 2 }));
  }

  @Step()
  async check(ctx: StepContext<ItemState>) {
    return this.env.step(ctx, () => {
      if (ctx.state.fail && !HEALED.has(ctx.state.n)) throw new Error(`item ${ctx.state.n} is bad`);
      return { checked: ctx.itemIndex ?? -1 };
    });
  }
}

@Pipeline({ name: 'fanout-item', version: '1.0.0', state: ItemState, agents: [DoubleAgent] })
export class FanOutItem {}

export class ParentState {
  @IsArray()
  items!: { n: number; fail?: boolean }[];

  @IsOptional()
  @IsArray()
  results?: unknown[];

  @IsOptional()
  @IsInt()
  sum?: number;
}

@injectable()
export class SumAgent extends Agent {
  @Step()
  sum(ctx: StepContext<ParentState>) {
    const results = (ctx.state.results ?? []) as { doubled?: number }[];
    return { sum: results.reduce((total, r) => total + (r.doubled ?? 0), 0) };
  }
}

/** Every item's child at once (concurrency = the 60 items of the tests, up to 1000). */
@Pipeline({
  name: 'fanout-parent',
  version: '1.0.0',
  state: ParentState,
  agents: [forEach((s: ParentState) => s.items, FanOutItem, { into: 'results', concurrency: 1000 }), SumAgent],
})
export class FanOutParent {}

/** At most 3 children open at once across the fleet. */
@Pipeline({
  name: 'fanout-bounded',
  version: '1.0.0',
  state: ParentState,
  agents: [forEach((s: ParentState) => s.items, FanOutItem, { into: 'results', concurrency: 3 }), SumAgent],
})
export class BoundedParent {}

/** Failed children land in `results` as error descriptions. */
@Pipeline({
  name: 'fanout-collect',
  version: '1.0.0',
  state: ParentState,
  agents: [forEach((s: ParentState) => s.items, FanOutItem, { into: 'results', concurrency: 1000, onItemError: 'collect' }), SumAgent],
})
export class CollectParent {}

const concat = (current: string[] | undefined, update: string[]) => [...(current ?? []), ...update];

/** The parent of a distributed agent body: the item steps see the parent's state and write into it (a reducer too). */
export class DistState extends ParentState {
  @IsOptional() @IsInt() n?: number;
  @IsOptional() @IsInt() doubled?: number;
  @IsOptional() @IsInt() checked?: number;
  @IsOptional() @IsInt() seen?: number;
  @IsOptional() @Reducer(concat) trail?: string[];
}

/** The body of the distributed forEach: the same two steps as a `FanOutItem` child, from `ctx.item`. */
@injectable()
export class ItemAgent extends Agent {
  constructor(@inject(FLEET_ENV) private readonly env: FleetEnv) {
    super();
  }

  @Step()
  async double(ctx: StepContext<DistState>) {
    const item = ctx.item as { n: number; fail?: boolean };
    // `seen`: the item's steps see the parent's state at the forEach (its item count).
    return this.env.step(ctx, () => ({ n: item.n, doubled: item.n * 2, seen: ctx.state.items.length, trail: [`d${item.n}`] }));
  }

  @Step()
  async check(ctx: StepContext<DistState>) {
    const item = ctx.item as { n: number; fail?: boolean };
    return this.env.step(ctx, () => {
      if (item.fail) throw new Error(`item ${item.n} is bad`);
      return { checked: ctx.itemIndex ?? -1, trail: [`c${item.n}`] };
    });
  }
}

/** `distribute: true` over an agent body: on a fleet each item is a hidden child run; in process, items of the parent. */
@Pipeline({
  name: 'fanout-distributed',
  version: '1.0.0',
  state: DistState,
  agents: [forEach((s: DistState) => s.items, ItemAgent, { into: 'results', concurrency: 1000, distribute: true }), SumAgent],
})
export class DistributedParent {}

/** ms each step of a {@link SlowItemAgent} takes: long enough to stop a fleet with items still open. */
export const SLOW_STEP_MS = 200;

/**
 * {@link ItemAgent}'s steps, slower, each logged in the step log under `<root run>#<item>`: the same key
 * whether the item runs as a hidden child run on the fleet or in the parent's process, so a count spans both.
 */
@injectable()
export class SlowItemAgent extends Agent {
  constructor(@inject(FLEET_ENV) private readonly env: FleetEnv) {
    super();
  }

  @Step()
  async double(ctx: StepContext<DistState>) {
    const item = ctx.item as { n: number };
    return this.logged(ctx, () => ({ n: item.n, doubled: item.n * 2, seen: ctx.state.items.length, trail: [`d${item.n}`] }));
  }

  @Step()
  async check(ctx: StepContext<DistState>) {
    const item = ctx.item as { n: number };
    return this.logged(ctx, () => ({ checked: ctx.itemIndex ?? -1, trail: [`c${item.n}`] }));
  }

  private async logged<T>(ctx: StepContext<DistState>, fn: () => T): Promise<T> {
    const key = `${ctx.runId.split('/')[0]}#${(ctx.item as { n: number }).n}`;
    const { schema, worker } = this.env.config;
    const { rows } = await this.env.pool.query<{ id: string }>(`INSERT INTO "${schema}".fleet_step_log (run_id, step, worker) VALUES ($1, $2, $3) RETURNING id`, [
      key,
      ctx.stepName,
      worker,
    ]);
    await new Promise((resolve) => setTimeout(resolve, SLOW_STEP_MS));
    const result = fn();
    await this.env.pool.query(`UPDATE "${schema}".fleet_step_log SET ended_at = clock_timestamp() WHERE id = $1`, [rows[0].id]);
    return result;
  }
}

/** A distributed agent body, 3 items open at once, slow steps: a fleet stopped early leaves items done, open and not started. */
@Pipeline({
  name: 'fanout-distributed-slow',
  version: '1.0.0',
  state: DistState,
  agents: [forEach((s: DistState) => s.items, SlowItemAgent, { into: 'results', concurrency: 3, distribute: true }), SumAgent],
})
export class SlowDistributedParent {}

export const FANOUT_PIPELINES = [FanOutParent, BoundedParent, CollectParent, FanOutItem, DistributedParent];

export function itemsOf(count: number, fail: (i: number) => boolean = () => false): { n: number; fail?: boolean }[] {
  return Array.from({ length: count }, (_, n) => (fail(n) ? { n, fail: true } : { n }));
}
