import type { Class, UntypedState } from './class-type';

/**
 * Control flow inside a `@Pipeline`'s `agents`: `parallel`, `loop`, `branch` and `forEach` build plain
 * descriptions that the plan reader turns into a tree. They nest freely; an array is a sequence.
 * Nothing here runs anything: the runtime records every decision these make (a branch key, a loop's
 * continue/stop, a forEach's item list) the moment it is made, and a resumed run follows the records.
 */

/** What `agents` (and every construct's body) accepts: an agent class, a construct, or a sequence of them. */
export type AgentEntry = Class | FlowConstruct | readonly AgentEntry[];

/** A selector over the shared state. Called once per decision; the answer is recorded, never re-asked. */
export type StateSelector<S, T> = (state: Readonly<S>) => T;

const CONSTRUCT = Symbol.for('waypoint:flow-construct');

interface ConstructBase {
  readonly [CONSTRUCT]: true;
  /** Label used in step paths instead of the default (`loop`, `loop#2`, `forEach(into)`, ...). */
  readonly name?: string;
}

export interface ParallelConstruct extends ConstructBase {
  readonly kind: 'parallel';
  readonly branches: readonly AgentEntry[];
}

export interface LoopOptions<S = UntypedState> {
  /** Checked after each iteration: the loop ends when it returns true. */
  until: StateSelector<S, boolean>;
  /** At most this many iterations; one more is `LoopLimitError` and the run fails (state kept). Default 100. */
  maxIterations?: number;
  /** Label in step paths. Default `loop` (`loop#2`, ... for later loops of the pipeline). */
  name?: string;
}

export interface LoopConstruct extends ConstructBase {
  readonly kind: 'loop';
  readonly until: StateSelector<UntypedState, boolean>;
  readonly maxIterations: number;
  readonly body: readonly AgentEntry[];
}

export interface BranchOptions {
  /** Label in step paths. Default `branch` (`branch#2`, ...). */
  name?: string;
}

export interface BranchConstruct extends ConstructBase {
  readonly kind: 'branch';
  readonly select: StateSelector<UntypedState, string>;
  readonly cases: Readonly<Record<string, AgentEntry>>;
}

export interface ForEachOptions {
  /** State property that receives the outputs, in item order. */
  into: string;
  /** Items in flight at once. Default 1. */
  concurrency?: number;
  /** Label in step paths. Default `forEach(<into>)`. */
  name?: string;
  /**
   * What a failed item does, for a `@Pipeline` body (one child run per item): 'fail' (default) fails the
   * run with `ITEM_FAILED`; 'collect' puts `{ error: { code, message }, runId, status, itemIndex }` in
   * `state[into][i]` and carries on.
   */
  onItemError?: 'fail' | 'collect';
  /**
   * For an agent or a sequence of agents as the body: in a run a fleet worker executes, each item becomes
   * a queued unit of work for the whole fleet (a hidden child run with its own records, listed under its
   * parent but not in `runs list` unless asked), and the parent waits without a worker. `state[into][i]`
   * is what the in-process forEach gives (the item's merged step outputs). Without a fleet the items run
   * in the parent's process as usual. A `@Pipeline` class body is distributed on a fleet anyway.
   */
  distribute?: boolean;
}

export interface ForEachConstruct extends ConstructBase {
  readonly kind: 'forEach';
  readonly items: StateSelector<UntypedState, readonly unknown[]>;
  /** An agent, a sequence, a construct, or a `@Pipeline` class (one child run per item). */
  readonly body: AgentEntry;
  readonly into: string;
  readonly concurrency: number;
  readonly onItemError?: 'fail' | 'collect';
  readonly distribute?: boolean;
}

export type FlowConstruct = ParallelConstruct | LoopConstruct | BranchConstruct | ForEachConstruct;

export function isFlowConstruct(value: unknown): value is FlowConstruct {
  return typeof value === 'object' && value !== null && (value as Partial<ConstructBase>)[CONSTRUCT] === true;
}

/**
 * Runs its branches concurrently; an array is a sequence. Each branch sees the state as it was at the
 * fork plus its own updates; at the join the branches' updates merge in declaration order. Two branches
 * setting the same property is `ParallelConflictError`, unless the property has a `@Reducer`.
 *
 * @example
 * agents: [Planner, parallel(WebResearch, [DocsResearch, Summarizer], ApiResearch), Writer]
 */
export function parallel(...branches: AgentEntry[]): ParallelConstruct {
  return { [CONSTRUCT]: true, kind: 'parallel', branches };
}

/**
 * Runs `body` until `until(state)` holds after an iteration, at most `maxIterations` times. Each
 * iteration's steps are their own records (`loop[2]/CodeGen/generate`); `ctx.iteration` counts from 0;
 * an agent's memory carries from one iteration to the next.
 *
 * @example
 * loop({ until: (s) => s.testsPass === true, maxIterations: 5 }, CodeGen, Validate)
 */
export function loop<S = UntypedState>(options: LoopOptions<S>, ...body: AgentEntry[]): LoopConstruct {
  return {
    [CONSTRUCT]: true,
    kind: 'loop',
    until: options?.until as StateSelector<UntypedState, boolean>,
    maxIterations: options?.maxIterations ?? 100,
    body,
    name: options?.name,
  };
}

/**
 * Runs the case whose key `select(state)` returns (an empty array runs nothing). The key is recorded
 * before the case starts; an unknown key is `UnknownBranchError`.
 *
 * @example
 * branch((s) => s.risk ?? 'low', { high: [HumanReview, Escalate], low: [] })
 */
export function branch<S = UntypedState>(select: StateSelector<S, string>, cases: Record<string, AgentEntry>, options: BranchOptions = {}): BranchConstruct {
  return { [CONSTRUCT]: true, kind: 'branch', select: select as StateSelector<UntypedState, string>, cases, name: options.name };
}

/**
 * Runs `body` once per item of `items(state)` (the list is recorded before the first item starts), at
 * most `concurrency` at a time, with `ctx.item` and `ctx.itemIndex`. The outputs land in `state[into]`
 * in item order: an agent or a sequence gives the item's merged step outputs; a `@Pipeline` class runs
 * one child run per item (id `<parent>/<into>/<index>`) and gives its final state. In a run a fleet worker
 * executes, those child runs are queued for the whole fleet and the parent waits without a worker (see
 * docs/fleet.md); `concurrency` then bounds the children open at once across the fleet.
 *
 * @example
 * forEach((s) => s.files ?? [], FileReviewer, { into: 'reviews', concurrency: 20 })
 */
export function forEach<S = UntypedState>(items: StateSelector<S, readonly unknown[]>, body: AgentEntry, options: ForEachOptions): ForEachConstruct {
  return {
    [CONSTRUCT]: true,
    kind: 'forEach',
    items: items as StateSelector<UntypedState, readonly unknown[]>,
    body,
    into: options?.into,
    concurrency: options?.concurrency ?? 1,
    onItemError: options?.onItemError,
    distribute: options?.distribute,
    name: options?.name,
  };
}
