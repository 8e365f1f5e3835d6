import 'reflect-metadata';
import { IsInt, IsOptional, IsString, Min } from 'class-validator';
import { Agent, Pipeline, Reducer, SideEffect, Step, serialize, type PipelineOptions, type StepContext } from '../src/index';

/**
 * The bench's pipelines, built at run time with the real decorators (as test/helpers/synthetic-pipeline
 * does), plus what a realistic one has and that helper lacks: a validated state class (so per-step
 * validation runs, as it does by default) and, optionally, one guarded side effect per step.
 */

/** A class (pipeline, agent, state), as the public options name it: the root entry has no name of its own for it. */
export type Class = NonNullable<PipelineOptions['state']>;

/** The shared state: declared properties are validated by class-validator after every step. */
export class BenchState {
  @IsString()
  subject!: string;

  @IsOptional()
  @IsString()
  value?: string;

  @IsOptional()
  @IsInt()
  @Min(0)
  at?: number;
}

/**
 * The state of the 'reducer' shape (issue 22): one list that grows by one item per step through a
 * `@Reducer`, so each step records only its own item however long the list is.
 */
export class BenchListState extends BenchState {
  @IsOptional()
  @Reducer((current: string[] | undefined, update: string[]) => (current ?? []).concat(update))
  items?: string[];
}

/** A service whose method is an external write, guarded by the idempotency guard. */
export class Notifier {
  sent = 0;

  @SideEffect({ name: 'notify' })
  notify(step: number): Promise<{ step: number }> {
    this.sent += 1;
    return Promise.resolve({ step });
  }
}

/** Mutable hooks, so one pipeline class serves several measurements. */
export interface StepHooks {
  /** Called at the start of every step with its 0-based position in the pipeline. */
  onStep?: (index: number) => void;
}

export type BenchStateShape = 'flat' | 'growing' | 'reducer';

/** Shape of a bench pipeline. */
export interface BenchPipelineOptions {
  /** Pipeline name: unique per Waypoint (resume finds the pipeline by it). */
  name: string;
  steps: number;
  /** Length of the string each step returns. */
  payloadBytes: number;
  /**
   * 'flat': each step overwrites `value` (constant state); 'growing': each step adds its own key;
   * 'reducer': each step adds one item to a list through `@Reducer` (the list grows, the update does not).
   */
  state: BenchStateShape;
  hooks: StepHooks;
  /** Each step calls this notifier's @SideEffect method once. */
  notifier?: Notifier;
  /** Steps per agent class. Default 50. */
  stepsPerAgent?: number;
}

/**
 * @example
 * const hooks: StepHooks = {};
 * const P = benchPipeline({ name: 'seq', steps: 200, payloadBytes: 1000, state: 'flat', hooks });
 * await waypoint.run(P, { runId: 'r1', input: { subject: 'bench' } });
 */
export function benchPipeline(options: BenchPipelineOptions): Class {
  const perAgent = options.stepsPerAgent ?? 50;
  const payload = 'x'.repeat(options.payloadBytes);
  const { hooks, notifier } = options;
  const agents: Class[] = [];
  for (let first = 0; first < options.steps; first += perAgent) {
    const agentName = `${options.name}Agent${first / perAgent}`;
    const agentClass = { [agentName]: class extends Agent {} }[agentName];
    for (let i = first; i < Math.min(options.steps, first + perAgent); i++) {
      const index = i;
      const name = `s${index}`;
      const method = async function (this: Agent, _ctx: StepContext) {
        hooks.onStep?.(index);
        if (notifier) await notifier.notify(index);
        if (options.state === 'reducer') return { items: [payload] };
        return options.state === 'flat' ? { value: payload, at: index } : { [`k${index}`]: payload };
      };
      Object.defineProperty(agentClass.prototype, name, { value: method, writable: true, configurable: true });
      Step()(agentClass.prototype, name, Object.getOwnPropertyDescriptor(agentClass.prototype, name)!);
    }
    agents.push(agentClass);
  }
  const pipeline = { [options.name]: class {} }[options.name];
  Pipeline({ name: options.name, version: '1.0.0', state: options.state === 'reducer' ? BenchListState : BenchState, agents })(pipeline);
  return pipeline;
}

/** The input every bench run starts from. */
export const BENCH_INPUT = { subject: 'bench' };

/** The serialized output of one flat-state step, by the runtime's own serializer: what the floors insert. */
export function flatStepPayload(payloadBytes: number, index: number): string {
  return serialize({ value: 'x'.repeat(payloadBytes), at: index });
}
