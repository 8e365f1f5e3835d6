import 'reflect-metadata';
import { Agent, Pipeline, Step, type StepContext } from '../../src/index';
import type { Class } from '../../src/decorators/options';

export interface SyntheticOptions {
  name: string;
  steps: number;
  /** Bytes of the string each step returns (its own key, so the state grows by this much per step). */
  payloadBytes?: number;
  /** Steps per agent; agents are created as needed. Default 50. */
  stepsPerAgent?: number;
  /** Called at the start of every step (counting, failure injection). */
  onStep?: (ctx: StepContext, index: number) => void | Promise<void>;
  /** Each step overwrites one key instead of adding its own, so the state stays the same size. */
  flatState?: boolean;
}

/**
 * Builds a pipeline of `steps` steps at run time by applying the real decorators, for long-run tests and
 * benchmarks (a 2,000-step pipeline is not something to write by hand).
 */
export function syntheticPipeline(options: SyntheticOptions): Class {
  const perAgent = options.stepsPerAgent ?? 50;
  const payload = 'x'.repeat(options.payloadBytes ?? 100);
  const agents: Class[] = [];
  for (let first = 0; first < options.steps; first += perAgent) {
    const agentClass = { [`Agent${first / perAgent}`]: class extends Agent {} }[`Agent${first / perAgent}`];
    for (let i = first; i < Math.min(options.steps, first + perAgent); i++) {
      const index = i;
      const name = `s${index}`;
      const method = async function (this: Agent, ctx: StepContext) {
        await options.onStep?.(ctx, index);
        return options.flatState ? { value: payload, at: index } : { [`k${index}`]: payload };
      };
      Object.defineProperty(agentClass.prototype, name, { value: method, writable: true, configurable: true });
      const descriptor = Object.getOwnPropertyDescriptor(agentClass.prototype, name)!;
      Step()(agentClass.prototype, name, descriptor);
    }
    agents.push(agentClass);
  }
  const pipeline = { [options.name]: class {} }[options.name];
  Pipeline({ name: options.name, version: '1.0.0', agents })(pipeline);
  return pipeline;
}
