import { readOwnSteps, readPipeline, readReducers, readSecrets } from '../../decorators/metadata';
import type { AgentEntry } from '../../decorators/flow';
import { buildFlow, needsFlow, type FlowNode } from './flow-plan';
import type { AnyClass, Class, RetryPolicy, StepOptions } from '../../decorators/options';
import { Agent, agentIdOf } from '../../contract/agent';
import { PipelineDefinitionError } from '../../contract/errors';
import { declaredProperties, undeclaredTargetsError, undeclaredTargetsOf } from './strict-state';

export type { ResolvedRetryPolicy, StepPlan, AgentPlan, PipelinePlan, StateTarget } from './plan-types';
import type { AgentPlan, PipelinePlan, ResolvedRetryPolicy, StepPlan } from './plan-types';

const cache = new WeakMap<AnyClass, PipelinePlan>();

/**
 * Reads a `@Pipeline` class and its agents' `@Step` metadata into a plan. The only reader of decorator
 * metadata; the runtime works from the plan alone.
 *
 * @example
 * const plan = readPlan(FinancialAnalysis); plan.steps.map((s) => s.key);
 */
export function readPlan(pipeline: Class): PipelinePlan {
  // `run(undefined, ...)` (a missing import, a typo) must be a typed error, not a TypeError from Reflect.
  if (typeof pipeline !== 'function') {
    throw new PipelineDefinitionError(
      `Expected a @Pipeline class, got ${pipeline === null ? 'null' : typeof pipeline}: pass the class decorated with @Pipeline({ name, version, agents }) (is its import missing?).`,
    );
  }
  const cached = cache.get(pipeline);
  if (cached) return cached;
  const meta = readPipeline(pipeline);
  if (!meta) {
    throw new PipelineDefinitionError(`${pipeline?.name ?? String(pipeline)} is not a pipeline: decorate it with @Pipeline({ name, version, agents }).`);
  }
  if (building.has(pipeline)) throw new PipelineDefinitionError(`Pipeline '${meta.name}' contains itself through a forEach; a child pipeline cannot run its parent.`);
  building.add(pipeline);
  let built: { agents: AgentPlan[]; steps: StepPlan[]; flow: FlowNode; linear: boolean };
  const reducers = meta.state ? readReducers(meta.state) : {};
  try {
    const entries = meta.agents as readonly AgentEntry[];
    const hasWhen = entries.some((e) => typeof e === 'function' && inheritedSteps(e).some((s) => s.options.when !== undefined));
    if (needsFlow(entries, hasWhen, Object.keys(reducers).length > 0)) {
      const flow = buildFlow({ pipeline: meta.name, readChild: readPlan, stepsOf: inheritedSteps, makeStep }, entries);
      built = { agents: flow.agents, steps: flow.steps, flow: flow.root, linear: false };
    } else {
      const line = straightLine(meta.name, entries as Class[]);
      const nodes: FlowNode[] = line.agents.map((agent) => ({ kind: 'agent', agent }));
      built = { ...line, flow: nodes.length === 1 ? nodes[0] : { kind: 'sequence', children: nodes }, linear: true };
    }
  } finally {
    building.delete(pipeline);
  }
  const { agents, steps } = built;
  const byKey = stepsByKey(meta.name, steps);
  const secrets = meta.state ? readSecrets(meta.state) : [];
  const declared = meta.state ? declaredProperties(meta.state, [...secrets, ...Object.keys(reducers)]) : undefined;
  const undeclaredTargets = undeclaredTargetsOf(meta.state, declared, built.flow);
  if (meta.strictState && meta.state && undeclaredTargets.length > 0) throw undeclaredTargetsError(meta.name, meta.state, undeclaredTargets);
  const plan: PipelinePlan = {
    pipeline,
    name: meta.name,
    version: meta.version,
    state: meta.state,
    agents,
    steps,
    byKey,
    migrations: meta.migrations ?? [],
    secrets,
    reducers,
    flow: built.flow,
    linear: built.linear,
    strictState: meta.strictState,
    durability: meta.durability,
    declared,
    undeclaredTargets,
  };
  cache.set(pipeline, plan);
  return plan;
}

const building = new Set<AnyClass>();

/** The plan of a pipeline whose agents are classes only: each agent's steps in order, once. */
function straightLine(name: string, types: Class[]): { agents: AgentPlan[]; steps: StepPlan[] } {
  const agents: AgentPlan[] = [];
  const steps: StepPlan[] = [];
  const ids = new Set<string>();
  types.forEach((type, agentIndex) => {
    if (!(type.prototype instanceof Agent)) {
      throw new PipelineDefinitionError(`Pipeline '${name}': agents[${agentIndex}] (${type.name}) does not extend Agent.`);
    }
    const id = agentIdOf(type);
    if (ids.has(id)) {
      throw new PipelineDefinitionError(`Pipeline '${name}': two agents share the id '${id}'. Give one a distinct 'static agentId'; ids key memories and step records.`);
    }
    ids.add(id);
    const recorded = inheritedSteps(type);
    if (recorded.length === 0) throw new PipelineDefinitionError(`Pipeline '${name}': agent ${type.name} has no @Step methods.`);
    const agentSteps = recorded.map(({ method, options }, stepIndex) =>
      makeStep(agentIndex, id, stepIndex, method, options, steps.length + stepIndex, `${id}/${options.name ?? method}`),
    );
    steps.push(...agentSteps);
    agents.push({ index: agentIndex, id, type: type as Class<Agent>, steps: agentSteps, scope: '', instance: id });
  });
  return { agents, steps };
}

function makeStep(agentIndex: number, agentId: string, stepIndex: number, method: string, options: StepOptions, position: number, key: string): StepPlan {
  return {
    position,
    agentIndex,
    agentId,
    stepIndex,
    name: options.name ?? method,
    key,
    method,
    retry: resolveRetry(options.retries),
    timeoutMs: options.timeoutMs,
    when: options.when,
  };
}

/** Steps of a class and its Agent ancestors, base classes first; an override keeps the base's position. */
function inheritedSteps(type: AnyClass): { method: string; options: StepOptions }[] {
  const chain: AnyClass[] = [];
  for (let c: AnyClass | null = type; c && c !== Agent && c !== Function.prototype; c = Object.getPrototypeOf(c) as AnyClass | null) chain.unshift(c);
  const out: { method: string; options: StepOptions }[] = [];
  const at = new Map<string, number>(); // a step name's index in `out`, so wide classes stay linear
  for (const ctor of chain) {
    for (const step of readOwnSteps(ctor)) {
      const name = step.options.name ?? step.method;
      const existing = at.get(name);
      if (existing !== undefined) out[existing] = step;
      else at.set(name, out.push(step) - 1);
    }
  }
  return out;
}

export function resolveRetry(retries: number | RetryPolicy | undefined): ResolvedRetryPolicy {
  const policy: RetryPolicy = typeof retries === 'number' ? { maxAttempts: retries + 1 } : (retries ?? {});
  return {
    maxAttempts: policy.maxAttempts ?? 1,
    initialDelayMs: policy.initialDelayMs ?? 200,
    maxDelayMs: policy.maxDelayMs ?? 30_000,
    factor: policy.factor ?? 2,
    jitter: policy.jitter ?? true,
    retryOn: policy.retryOn,
  };
}

/** The plan's steps by key; two steps with one key are a definition error. */
function stepsByKey(pipeline: string, steps: readonly StepPlan[]): Map<string, StepPlan> {
  const byKey = new Map<string, StepPlan>();
  for (const step of steps) {
    if (byKey.has(step.key)) throw new PipelineDefinitionError(`Pipeline '${pipeline}': duplicate step '${step.key}'.`);
    byKey.set(step.key, step);
  }
  return byKey;
}
