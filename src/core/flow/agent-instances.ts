import type { Agent } from '../../contract/agent';
import type { AgentPlan } from '../plan/plan-reader';
import type { StepRunner } from '../run/execution';
import { serialize } from '../state/serializer';

/**
 * The agents of one live execution, one per agent instance (a top-level agent, or its own instance per
 * branch, item or iteration scope), made on first use from the container with the instance's saved memory.
 * A new instance's initial memory goes into `memories`, so its first step's row stores memory only if it changed.
 *
 * @example
 * const agents = new AgentInstances(runner, runId, memories); const agent = agents.get(agentPlan, 'Research', 'Research/gather');
 */
export class AgentInstances {
  private readonly agents = new Map<string, Agent>();

  constructor(
    private readonly runner: StepRunner,
    private readonly runId: string,
    private readonly memories: Map<string, string>,
  ) {}

  /** The agent of `instance` (made when it is first asked for, by the step at `path`). */
  get(agentPlan: AgentPlan, instance: string, path: string): Agent {
    let agent = this.agents.get(instance);
    if (agent) return agent;
    const saved = this.memories.get(instance);
    agent = this.runner.createAgent(agentPlan.type, saved, this.runId);
    if (saved === undefined) this.memories.set(instance, serialize(agent.snapshot(), { runId: this.runId, step: path, what: `initial memory of agent '${agentPlan.id}'` }));
    this.agents.set(instance, agent);
    return agent;
  }
}
