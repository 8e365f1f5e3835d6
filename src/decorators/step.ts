import { Agent } from '../contract/agent';
import { PipelineDefinitionError } from '../contract/errors';
import { hasOwnStepNamed, recordStep } from './metadata';
import { validateRetries } from './validate-options';
import type { StepOptions } from './options';
import type { AnyClass } from './class-type';

/**
 * Marks an agent method as a durable step. Steps of an agent run in declaration order; each one gets a
 * `StepContext` and returns a partial state update. A completed step never runs again for the same run:
 * on resume its recorded output is reused.
 *
 * @example
 * class ResearchAgent extends Agent {
 *   @Step({ retries: 3, timeoutMs: 60_000 })
 *   async gatherSources(ctx: StepContext<AnalysisState>) { return { sources: await search(ctx.state.ticker) }; }
 * }
 */
export function Step(options: StepOptions = {}): MethodDecorator {
  return (target, key, descriptor) => {
    const owner = (target as { constructor: AnyClass }).constructor;
    const where = `@Step on ${owner.name}.${String(key)}`;
    if (typeof key !== 'string') throw new PipelineDefinitionError(`${where}: step methods need a string name.`);
    if (!(target instanceof Agent)) {
      throw new PipelineDefinitionError(`${where}: ${owner.name} does not extend Agent. Declare it as 'class ${owner.name} extends Agent'.`);
    }
    if (typeof descriptor.value !== 'function') throw new PipelineDefinitionError(`${where}: only methods can be steps.`);
    const name = options.name ?? key;
    if (typeof name !== 'string' || !/^[A-Za-z0-9_.:-]+$/.test(name)) {
      throw new PipelineDefinitionError(`${where}: step name '${String(name)}' must be non-empty and use letters, digits, '_', '.', ':' or '-'.`);
    }
    if (hasOwnStepNamed(owner, name)) {
      throw new PipelineDefinitionError(`${where}: ${owner.name} already has a step named '${name}'. Give one of them another { name }.`);
    }
    validateRetries(where, options.retries);
    if (options.timeoutMs !== undefined && !(Number.isFinite(options.timeoutMs) && options.timeoutMs > 0)) {
      throw new PipelineDefinitionError(`${where}: timeoutMs must be a positive number of milliseconds, got ${String(options.timeoutMs)}.`);
    }
    if (options.when !== undefined && typeof options.when !== 'function') {
      throw new PipelineDefinitionError(`${where}: when must be a function (state) => boolean, got ${typeof options.when}.`);
    }
    recordStep(owner, { method: key, options: { ...options, name } });
  };
}
