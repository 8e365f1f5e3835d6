import { PipelineDefinitionError } from '../contract/errors';
import { recordPipeline } from './metadata';
import type { PipelineOptions } from './options';

/**
 * Declares a pipeline: its name and version (recorded with every run), its agents in execution order and
 * the class-validator state class that the input and every loaded state must satisfy.
 *
 * @example
 * @Pipeline({ name: 'financial-analysis', version: '2.1.0', state: AnalysisState,
 *             agents: [ResearchAgent, CodeGenAgent, ValidationAgent, ReportingAgent] })
 * class FinancialAnalysis {}
 */
export function Pipeline(options: PipelineOptions): ClassDecorator {
  return (target) => {
    const where = `@Pipeline on ${target.name}`;
    if (!options || typeof options.name !== 'string' || !/^[A-Za-z0-9_.:-]+$/.test(options.name)) {
      throw new PipelineDefinitionError(`${where}: name must be non-empty and use letters, digits, '_', '.', ':' or '-'.`);
    }
    if (typeof options.version !== 'string' || options.version.trim() === '') {
      throw new PipelineDefinitionError(`${where}: version is required (for example '1.0.0'); it is recorded with every run.`);
    }
    if (!Array.isArray(options.agents) || options.agents.length === 0) {
      throw new PipelineDefinitionError(`${where}: a pipeline needs at least one agent in 'agents'.`);
    }
    options.agents.forEach((agent, i) => {
      if (typeof agent !== 'function') {
        throw new PipelineDefinitionError(`${where}: agents[${i}] is not a class (got ${String(agent)}); check for a circular import.`);
      }
    });
    if (options.state !== undefined && typeof options.state !== 'function') {
      throw new PipelineDefinitionError(`${where}: state must be a class decorated with class-validator rules.`);
    }
    recordPipeline(target, { ...options, agents: [...options.agents], migrations: [...(options.migrations ?? [])] });
  };
}
