import 'reflect-metadata';
import { IsInt, IsOptional, IsString } from 'class-validator';
import { Agent, branch, forEach, NonRetryableError, parallel, Pipeline, Step, type StepContext } from '../src/index';
import type { Class } from './pipeline';

/**
 * The control-flow pipelines of the `flow` group (bench/flow.ts), with the real decorators: a 4-branch
 * `parallel` of 5 sleeping steps per branch beside the same 5 steps as a straight line, a `forEach` of
 * one 1 KB step per item, and a pipeline with every kind of control-flow row for the bytes figure.
 * Each pipeline name is unique, so one Waypoint can run them all.
 */

/** Milliseconds each step of the parallel figure sleeps (stands in for a model or API call). */
export const STEP_MS = 20;
/** Length of the string a 1 KB step returns. */
export const PAYLOAD_BYTES = 1000;
const PAYLOAD = 'x'.repeat(PAYLOAD_BYTES);

/** State of every flow pipeline: each parallel branch writes its own property, so branches never conflict. */
export class FlowBenchState {
  @IsString() subject!: string;
  @IsOptional() @IsString() value?: string;
  @IsOptional() @IsInt() at?: number;
  @IsOptional() @IsString() b0?: string;
  @IsOptional() @IsString() b1?: string;
  @IsOptional() @IsString() b2?: string;
  @IsOptional() @IsString() b3?: string;
  @IsOptional() @IsString() route?: string;
  @IsOptional() items?: number[];
  @IsOptional() results?: unknown[];
}

/** Mutable hooks, so one set of pipeline classes serves every measurement. */
export interface FlowHooks {
  /** Called at the start of every forEach item step with the item index. */
  onItem?: (index: number) => void;
  /** The item step throws a NonRetryableError at this index (once; cleared when thrown). */
  failAtItem?: number;
}

export const flowHooks: FlowHooks = {};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Adds `@Step()` methods to an agent class at run time (decorators are not allowed on class expressions). */
function withSteps(agent: Class, steps: Record<string, () => Record<string, unknown> | Promise<Record<string, unknown>>>): Class {
  for (const [name, method] of Object.entries(steps)) {
    const prototype = agent.prototype as object;
    Object.defineProperty(prototype, name, { value: method, writable: true, configurable: true });
    Step()(prototype, name, Object.getOwnPropertyDescriptor(prototype, name)!);
  }
  return agent;
}

/** One branch's worth of work: 5 steps of STEP_MS, each writing the branch's own property. */
function fiveSteps(name: string, property: 'value' | 'b0' | 'b1' | 'b2' | 'b3'): Class {
  const agent = { [name]: class extends Agent {} }[name];
  const steps: Record<string, () => Promise<Record<string, unknown>>> = {};
  for (let i = 1; i <= 5; i++) {
    steps[`s${i}`] = async () => {
      await sleep(STEP_MS);
      return { [property]: `step ${i}` };
    };
  }
  return withSteps(agent, steps);
}

const Line = fiveSteps('Line', 'value');
const Branch0 = fiveSteps('Branch0', 'b0');
const Branch1 = fiveSteps('Branch1', 'b1');
const Branch2 = fiveSteps('Branch2', 'b2');
const Branch3 = fiveSteps('Branch3', 'b3');

/** One branch alone: 5 x 20 ms as a straight-line pipeline (no control flow, the sequential executor). */
@Pipeline({ name: 'flow-line', version: '1.0.0', state: FlowBenchState, agents: [Line] })
export class FlowLine {}

/** 4 branches of 5 x 20 ms. */
@Pipeline({ name: 'flow-parallel', version: '1.0.0', state: FlowBenchState, agents: [parallel(Branch0, Branch1, Branch2, Branch3)] })
export class FlowParallel {}

/** One step per item with a 1 KB output. */
class ItemWorker extends Agent {
  @Step() work(ctx: StepContext<FlowBenchState>) {
    const index = ctx.itemIndex!;
    flowHooks.onItem?.(index);
    if (flowHooks.failAtItem === index) {
      flowHooks.failAtItem = undefined;
      return Promise.reject(new NonRetryableError(`bench: stop at item ${index}`));
    }
    return { item: index, text: PAYLOAD };
  }
}

/** The item list comes from the input (`items`), so one class serves 10 and 1,000 items. */
const items = (s: FlowBenchState) => s.items ?? [];

/** `forEach` at concurrency 20 (throughput figure). */
@Pipeline({ name: 'flow-foreach-20', version: '1.0.0', state: FlowBenchState, agents: [forEach(items, ItemWorker, { into: 'results', concurrency: 20 })] })
export class FlowForEach20 {}

/** `forEach` at concurrency 1 (resume figure: a failure at item k leaves exactly k items done). */
@Pipeline({ name: 'flow-foreach-1', version: '1.0.0', state: FlowBenchState, agents: [forEach(items, ItemWorker, { into: 'results', concurrency: 1 })] })
export class FlowForEach1 {}

/** A straight-line step with a 1 KB output (the baseline row of the bytes figure). */
class Straight extends Agent {
  @Step() write() {
    return { value: PAYLOAD, at: 1 };
  }
}

function oneKbBranch(name: string, property: 'b0' | 'b1'): Class {
  return withSteps({ [name]: class extends Agent {} }[name], { write: () => ({ [property]: PAYLOAD }) });
}
const Side0 = oneKbBranch('Side0', 'b0');
const Side1 = oneKbBranch('Side1', 'b1');
class Routed extends Agent {
  @Step() write() {
    return { route: PAYLOAD };
  }
}

/** Every control-flow row kind: a straight step, parallel branch steps, a branch decision, a forEach item list and item steps. */
@Pipeline({
  name: 'flow-rows',
  version: '1.0.0',
  state: FlowBenchState,
  agents: [Straight, parallel(Side0, Side1), branch(() => 'on', { on: Routed, off: [] }), forEach(items, ItemWorker, { into: 'results', concurrency: 20 })],
})
export class FlowRows {}

/** The input of a run over `n` items. */
export function flowInput(n = 0): { subject: string; items?: number[] } {
  return n > 0 ? { subject: 'bench', items: Array.from({ length: n }, (_, i) => i) } : { subject: 'bench' };
}
