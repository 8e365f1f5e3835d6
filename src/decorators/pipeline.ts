import { PipelineDefinitionError } from '../contract/errors';
import { isFlowConstruct } from './flow';
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
    checkEntries(where, 'agents', options.agents);
    if (options.state !== undefined && typeof options.state !== 'function') {
      throw new PipelineDefinitionError(`${where}: state must be a class decorated with class-validator rules.`);
    }
    if (options.strictState !== undefined && typeof options.strictState !== 'boolean') {
      throw new PipelineDefinitionError(`${where}: strictState must be true or false, got ${String(options.strictState)}.`);
    }
    if (options.durability !== undefined && options.durability !== 'sync' && options.durability !== 'async') {
      throw new PipelineDefinitionError(`${where}: durability must be 'sync' or 'async', got ${String(options.durability)}.`);
    }
    if (options.strictState && options.state === undefined) {
      throw new PipelineDefinitionError(
        `${where}: strictState checks properties against the state class, and this pipeline has none: add state: YourStateClass, or remove strictState.`,
      );
    }
    recordPipeline(target, { ...options, agents: [...options.agents], migrations: [...(options.migrations ?? [])] });
  };
}

/** Checks every entry of `agents` (and of nested constructs) is a class, a construct or an array of them. */
function checkEntries(where: string, at: string, entries: readonly unknown[]): void {
  entries.forEach((entry, i) => checkEntry(where, `${at}[${i}]`, entry));
}

function checkEntry(where: string, at: string, entry: unknown): void {
  if (typeof entry === 'function') return;
  if (Array.isArray(entry)) return checkEntries(where, at, entry);
  if (!isFlowConstruct(entry)) {
    throw new PipelineDefinitionError(
      `${where}: ${at} is not a class (got ${String(entry)}): pass an agent class, a construct (parallel, loop, branch, forEach) or an array of them; check for a circular import.`,
    );
  }
  const bad = (what: string) => new PipelineDefinitionError(`${where}: ${at} (${entry.kind}) ${what}.`);
  const name = (entry as { name?: unknown }).name;
  if (name !== undefined && (typeof name !== 'string' || !/^[A-Za-z0-9_.:#-]+$/.test(name)))
    throw bad(`name ${typeof name === 'string' ? `'${name}'` : `of type ${typeof name}`} must use letters, digits, '_', '.', ':', '#' or '-'`);
  switch (entry.kind) {
    case 'parallel':
      if (entry.branches.length === 0) throw bad('needs at least one branch');
      return checkEntries(where, `${at}.branches`, entry.branches);
    case 'loop':
      if (typeof entry.until !== 'function') throw bad('needs { until: (state) => boolean }');
      if (!Number.isInteger(entry.maxIterations) || entry.maxIterations < 1) throw bad(`needs maxIterations >= 1, got ${String(entry.maxIterations)}`);
      if (entry.body.length === 0) throw bad('needs a body: loop({ until }, AgentA, AgentB)');
      return checkEntries(where, `${at}.body`, entry.body);
    case 'branch':
      if (typeof entry.select !== 'function') throw bad('needs a selector (state) => key as its first argument');
      if (entry.cases === null || typeof entry.cases !== 'object' || Object.keys(entry.cases).length === 0) throw bad('needs cases: { key: Agent | [Agents] }');
      for (const key of Object.keys(entry.cases)) {
        if (!/^[A-Za-z0-9_.:-]+$/.test(key)) throw bad(`case '${key}' must use letters, digits, '_', '.', ':' or '-' (it is part of step paths)`);
        checkEntry(where, `${at}.cases.${key}`, entry.cases[key]);
      }
      return;
    case 'forEach':
      if (typeof entry.items !== 'function') throw bad('needs an item selector (state) => items as its first argument');
      if (typeof entry.into !== 'string' || !/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(entry.into)) throw bad(`needs { into: '<state property>' }, got ${String(entry.into)}`);
      if (!Number.isInteger(entry.concurrency) || entry.concurrency < 1) throw bad(`needs concurrency >= 1, got ${String(entry.concurrency)}`);
      return checkEntry(where, `${at}.body`, entry.body);
  }
}
