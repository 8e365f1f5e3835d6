import 'reflect-metadata';
import { IsOptional, IsString } from 'class-validator';
import { Agent, Pipeline, Step, type StepContext } from '../src/index';
import type { Class } from './pipeline';

/**
 * The realistic pipeline of issue 22, beside the flat one of bench/pipeline.ts: 20 agents, a state class
 * with 200 optional class-validator properties (plus the required `subject`), every step adding ~1 KB to
 * the state under a new key and setting one declared property, each agent keeping a small memory that
 * changes at every step (so it is saved with every step). Validation stays on (the default).
 *
 * Every step touches exactly one declared (validated) property and adds one new 1 KB property, whatever
 * its number: the state grows by ~1 KB per step for the whole run, and the validation work a step asks
 * for is the same at step 10 and at step 2,000, so a growing per-step cost can only come from the runtime.
 */

/** Declared optional properties of the realistic state class. */
export const REALISTIC_WIDTH = 200;
export const REALISTIC_AGENTS = 20;

/** Built at run time with the real decorators: 200 hand-written properties would say nothing more. */
function realisticStateClass(): Class {
  class RealisticState {
    subject!: string;
  }
  IsString()(RealisticState.prototype, 'subject');
  for (let i = 0; i < REALISTIC_WIDTH; i++) {
    IsOptional()(RealisticState.prototype, `f${i}`);
    IsString()(RealisticState.prototype, `f${i}`);
  }
  return RealisticState;
}

/** One class for every pipeline: the class-validator metadata of 200 properties is registered once. */
export const RealisticState = realisticStateClass();

/** Hooks shared with bench/timed-run.ts's shape: called at the start of every step with its position. */
export interface RealisticHooks {
  onStep?: (index: number) => void;
}

/**
 * @example
 * const hooks: RealisticHooks = {};
 * const P = realisticPipeline('real_pg', 200, hooks); // 20 agents x 10 steps
 */
export function realisticPipeline(name: string, steps: number, hooks: RealisticHooks, payloadBytes = 1000): Class {
  if (steps % REALISTIC_AGENTS !== 0) throw new Error(`realisticPipeline: ${steps} steps do not split over ${REALISTIC_AGENTS} agents`);
  const perAgent = steps / REALISTIC_AGENTS;
  const payload = 'x'.repeat(payloadBytes);
  const agents: Class[] = [];
  for (let a = 0; a < REALISTIC_AGENTS; a++) {
    const agentName = `${name}Agent${a}`;
    const agentClass = {
      [agentName]: class extends Agent<{ done: number; last: string | null }> {
        override memory = { done: 0, last: null as string | null };
      },
    }[agentName];
    for (let s = 0; s < perAgent; s++) {
      // Steps run agent by agent: agent a's step s is step a * perAgent + s of the run.
      const index = a * perAgent + s;
      // The step's strings are built once, here: what the step body costs is the step's, and the
      // figure measured over these steps is the runtime's.
      const declared = `f${index % REALISTIC_WIDTH}`;
      const added = `r${index}`;
      const note = `step ${index} of agent ${a}`;
      const last = `s${index}`;
      const method = function (this: Agent<{ done: number; last: string | null }>, _ctx: StepContext) {
        hooks.onStep?.(index);
        this.memory = { done: this.memory.done + 1, last };
        return { [declared]: note, [added]: payload };
      };
      Object.defineProperty(agentClass.prototype, `s${index}`, { value: method, writable: true, configurable: true });
      Step()(agentClass.prototype, `s${index}`, Object.getOwnPropertyDescriptor(agentClass.prototype, `s${index}`)!);
    }
    agents.push(agentClass);
  }
  const pipeline = { [name]: class {} }[name];
  Pipeline({ name, version: '1.0.0', state: RealisticState, agents })(pipeline);
  return pipeline;
}
