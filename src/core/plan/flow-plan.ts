import { isFlowConstruct, type AgentEntry, type FlowConstruct } from '../../decorators/flow';
import type { AnyClass, Class } from '../../decorators/options';
import { readPipeline } from '../../decorators/metadata';
import { Agent, agentIdOf } from '../../contract/agent';
import { PipelineDefinitionError } from '../../contract/errors';
import type { AgentPlan, PipelinePlan, StepPlan } from './plan-types';

export type { FlowNode, AgentNode, SequenceNode, ParallelNode, LoopNode, BranchNode, ForEachNode } from './plan-types';
import type { AgentNode, FlowNode } from './plan-types';

/** What building the tree adds to a plan: the tree, and every agent occurrence and step template in it. */
export interface BuiltFlow {
  root: FlowNode;
  agents: AgentPlan[];
  steps: StepPlan[];
}

interface Builder {
  pipeline: string;
  agents: AgentPlan[];
  steps: StepPlan[];
  labels: Set<string>;
  counters: Map<string, number>;
  instances: Set<string>;
  readChild: (pipeline: Class) => PipelinePlan;
  stepsOf: (type: AnyClass) => { method: string; options: import('../../decorators/options').StepOptions }[];
  makeStep: (
    agentIndex: number,
    agentId: string,
    stepIndex: number,
    method: string,
    options: import('../../decorators/options').StepOptions,
    position: number,
    key: string,
  ) => StepPlan;
}

/**
 * Builds the tree of a pipeline's `agents`. Step templates get keys with `*` for what is known only at
 * run time (`loop[*]/CodeGen/generate`, `forEach(reviews)[*]/FileReviewer/review`); a top-level agent's
 * steps keep `agentId/stepName`, so a straight line reads the same as before control flow existed.
 */
export function buildFlow(builder: Omit<Builder, 'agents' | 'steps' | 'labels' | 'counters' | 'instances'>, entries: readonly AgentEntry[]): BuiltFlow {
  const b: Builder = { ...builder, agents: [], steps: [], labels: new Set(), counters: new Map(), instances: new Set() };
  const root = sequence(b, entries, '', '');
  return { root, agents: b.agents, steps: b.steps };
}

function sequence(b: Builder, entries: readonly AgentEntry[], scope: string, memory: string): FlowNode {
  const children = entries.map((entry) => node(b, entry, scope, memory));
  return children.length === 1 ? children[0] : { kind: 'sequence', children };
}

function node(b: Builder, entry: AgentEntry, scope: string, memory: string): FlowNode {
  if (Array.isArray(entry)) return sequence(b, entry, scope, memory);
  if (isFlowConstruct(entry)) return construct(b, entry, scope, memory);
  return agentNode(b, entry as Class, scope, memory);
}

function agentNode(b: Builder, type: Class, scope: string, memory: string): AgentNode {
  if (!(type.prototype instanceof Agent)) {
    if (readPipeline(type))
      throw new PipelineDefinitionError(`Pipeline '${b.pipeline}': ${type.name} is a @Pipeline; a child pipeline runs per item of a forEach(items, ${type.name}, { into }).`);
    throw new PipelineDefinitionError(`Pipeline '${b.pipeline}': ${type.name} does not extend Agent.`);
  }
  const id = agentIdOf(type);
  const instance = `${memory}${id}`;
  if (b.instances.has(instance)) {
    throw new PipelineDefinitionError(
      `Pipeline '${b.pipeline}': agent '${id}' appears twice in the same place (${scope || 'the top level'}). Give one a distinct 'static agentId'; ids key memories and step records.`,
    );
  }
  b.instances.add(instance);
  const recorded = b.stepsOf(type);
  if (recorded.length === 0) throw new PipelineDefinitionError(`Pipeline '${b.pipeline}': agent ${type.name} has no @Step methods.`);
  const index = b.agents.length;
  const steps = recorded.map(({ method, options }, stepIndex) =>
    b.makeStep(index, id, stepIndex, method, options, b.steps.length + stepIndex, `${scope}${id}/${options.name ?? method}`),
  );
  b.steps.push(...steps);
  const agent: AgentPlan = { index, id, type: type as Class<Agent>, steps, scope, instance };
  b.agents.push(agent);
  return { kind: 'agent', agent };
}

function construct(b: Builder, entry: FlowConstruct, scope: string, memory: string): FlowNode {
  const label = labelOf(b, entry);
  switch (entry.kind) {
    case 'parallel':
      return {
        kind: 'parallel',
        label,
        branches: entry.branches.map((branch, i) => node(b, branch, `${scope}${label}[${i}]/`, `${memory}${label}[${i}]/`)),
      };
    case 'loop':
      return { kind: 'loop', label, until: entry.until, maxIterations: entry.maxIterations, body: sequence(b, entry.body, `${scope}${label}[*]/`, `${memory}${label}/`) };
    case 'branch':
      return {
        kind: 'branch',
        label,
        select: entry.select,
        cases: new Map(Object.entries(entry.cases).map(([key, body]) => [key, node(b, body, `${scope}${label}[${key}]/`, `${memory}${label}[${key}]/`)])),
      };
    case 'forEach': {
      const body = entry.body;
      const isPipeline = typeof body === 'function' && readPipeline(body) !== undefined;
      if (entry.onItemError !== undefined && entry.onItemError !== 'fail' && entry.onItemError !== 'collect') {
        throw new PipelineDefinitionError(`Pipeline '${b.pipeline}': ${label} has onItemError ${JSON.stringify(entry.onItemError)}; use 'fail' or 'collect'.`);
      }
      if (entry.onItemError === 'collect' && !isPipeline) {
        throw new PipelineDefinitionError(
          `Pipeline '${b.pipeline}': ${label} collects item errors (onItemError: 'collect'), which needs a @Pipeline class as its body (one child run per item, whose failure is recorded with the child).`,
        );
      }
      if (entry.distribute !== undefined && typeof entry.distribute !== 'boolean') {
        throw new PipelineDefinitionError(`Pipeline '${b.pipeline}': ${label} has distribute ${JSON.stringify(entry.distribute)}; use true or false.`);
      }
      const distributed = entry.distribute === true && !isPipeline;
      if (distributed && !agentsOnly(body)) {
        throw new PipelineDefinitionError(
          `Pipeline '${b.pipeline}': ${label} distributes its items (distribute: true), which needs an agent or a sequence of agents as its body; put constructs inside a @Pipeline class and use it as the body (one child run per item).`,
        );
      }
      return {
        kind: 'forEach',
        label,
        items: entry.items,
        into: entry.into,
        concurrency: entry.concurrency,
        onItemError: entry.onItemError ?? 'fail',
        body: isPipeline ? null : node(b, body, `${scope}${label}[*]/`, `${memory}${label}[*]/`),
        child: isPipeline ? b.readChild(body) : null,
        distributed: distributed ? body : null,
      };
    }
  }
}

/** An agent class or a (nested) array of agent classes: what a distributed forEach body may be. */
function agentsOnly(entry: AgentEntry): boolean {
  if (Array.isArray(entry)) return entry.length > 0 && entry.every((e: AgentEntry) => agentsOnly(e));
  return typeof entry === 'function' && readPipeline(entry) === undefined;
}

/** `name` when given, else the kind (`forEach(<into>)` for a forEach), numbered from the second on. */
function labelOf(b: Builder, entry: FlowConstruct): string {
  const base = entry.name ?? (entry.kind === 'forEach' ? `forEach(${entry.into})` : entry.kind);
  if (entry.name !== undefined) {
    if (b.labels.has(base)) throw new PipelineDefinitionError(`Pipeline '${b.pipeline}': two constructs are named '${base}'; names label step paths and must be unique.`);
    b.labels.add(base);
    return base;
  }
  const n = (b.counters.get(base) ?? 0) + 1;
  b.counters.set(base, n);
  let label = n === 1 ? base : `${base}#${n}`;
  while (b.labels.has(label)) label = `${label}'`;
  b.labels.add(label);
  return label;
}

/** True when a plan needs the control-flow runtime: a construct, a conditional step, or a reducer. */
export function needsFlow(entries: readonly AgentEntry[], hasWhen: boolean, hasReducers: boolean): boolean {
  return hasWhen || hasReducers || entries.some((e) => typeof e !== 'function');
}
