/**
 * Base class of every agent. Its `@Step` methods run in declaration order; its memory is saved with every
 * step it runs and restored on resume.
 *
 * Override `snapshot()` / `restore()` when the memory is not a plain serializable object (a cache, a client).
 *
 * @example
 * class ResearchAgent extends Agent<{ queries: string[] }> {
 *   memory = { queries: [] };
 *   @Step() async search(ctx: StepContext<State>) { this.memory.queries.push(ctx.state.ticker); return { found: true }; }
 * }
 */
export abstract class Agent<M = Record<string, unknown>> {
  /** The agent's own memory, persisted with each of its steps. */
  memory: M = {} as M;

  /** The value persisted as this agent's memory after each of its steps. */
  snapshot(): unknown {
    return this.memory;
  }

  /** Restores memory from the value `snapshot()` returned in an earlier process. */
  restore(snapshot: unknown): void {
    this.memory = snapshot as M;
  }
}

/** Stable id of an agent class: its static `agentId` when declared, else the class name. */
export function agentIdOf(ctor: { readonly name: string; readonly agentId?: unknown }): string {
  return typeof ctor.agentId === 'string' && ctor.agentId.length > 0 ? ctor.agentId : ctor.name;
}
