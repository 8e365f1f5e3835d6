import type { CheckpointMigration, Class, RetryPolicy, UntypedState } from '../../decorators/options';
import type { ReducerFn } from '../../decorators/metadata';
import type { Agent } from '../../contract/agent';
import type { AgentEntry, StateSelector } from '../../decorators/flow';

/** What the plan reader produces and the runtime executes. */

/** A step's retry policy with every default filled in. */
export type ResolvedRetryPolicy = Required<Omit<RetryPolicy, 'retryOn'>> & Pick<RetryPolicy, 'retryOn'>;

export interface StepPlan {
  /** Position in the whole pipeline (0-based). */
  position: number;
  agentIndex: number;
  agentId: string;
  stepIndex: number;
  name: string;
  /** `agentId/name`: how recorded steps are matched to code across versions. */
  key: string;
  method: string;
  retry: ResolvedRetryPolicy;
  timeoutMs: number | undefined;
  /** `@Step({ when })`: the step runs only when it returns true (the answer is recorded). */
  when?: (state: UntypedState) => boolean;
}

export interface AgentPlan {
  index: number;
  id: string;
  type: Class<Agent>;
  steps: StepPlan[];
  /** Where the agent sits in the control-flow tree (`parallel[1]/`, `loop[*]/`); '' at the top level. */
  scope: string;
  /** Key of the agent's memory: its id, prefixed by the scope without loop iterations (`loop/CodeGen`). */
  instance: string;
}

/** What the runtime executes: built once per pipeline class from its decorators, then cached. */
export interface PipelinePlan {
  pipeline: Class;
  name: string;
  version: string;
  state: Class | undefined;
  agents: AgentPlan[];
  steps: StepPlan[];
  byKey: ReadonlyMap<string, StepPlan>;
  migrations: CheckpointMigration[];
  /** State properties marked `@Secret()`. */
  secrets: string[];
  /** State properties with a `@Reducer`, by name. */
  reducers: Readonly<Record<string, ReducerFn>>;
  /** The tree the interpreter runs: a straight line of agents is a sequence of agent nodes. */
  flow: FlowNode;
  /**
   * True for a straight line (agents only, no `when`, no reducer): every step runs once, in plan order, so
   * a run's position is its cursor and its planned steps are `steps`. Readers use it to skip reading rows.
   */
  linear: boolean;
  /** `@Pipeline({ strictState })` as given; undefined follows the Waypoint's `strictState` default. */
  strictState: boolean | undefined;
  /** `@Pipeline({ durability })` as given; undefined follows the Waypoint's `durability` (default 'sync'). */
  durability: 'sync' | 'async' | undefined;
  /** The properties the state class declares, computed once per class; undefined without a state class. */
  declared: ReadonlySet<string> | undefined;
  /** State properties the plan's constructs write (a `forEach`'s `into`) that the state class does not declare. */
  undeclaredTargets: readonly StateTarget[];
}

/** A state property a construct writes: `construct` is its label in step paths (`forEach(reviews)`). */
export interface StateTarget {
  construct: string;
  property: string;
}

/**
 * The tree a control-flow pipeline runs. Labels are unique in the pipeline (`loop`, `loop#2`,
 * `forEach(reviews)`), so a step's path is unique in a run and the same across re-executions.
 */
export type FlowNode = AgentNode | SequenceNode | ParallelNode | LoopNode | BranchNode | ForEachNode;

export interface AgentNode {
  kind: 'agent';
  agent: AgentPlan;
}

export interface SequenceNode {
  kind: 'sequence';
  children: FlowNode[];
}

export interface ParallelNode {
  kind: 'parallel';
  label: string;
  branches: FlowNode[];
}

export interface LoopNode {
  kind: 'loop';
  label: string;
  until: StateSelector<UntypedState, boolean>;
  maxIterations: number;
  body: FlowNode;
}

export interface BranchNode {
  kind: 'branch';
  label: string;
  select: StateSelector<UntypedState, string>;
  cases: ReadonlyMap<string, FlowNode>;
}

export interface ForEachNode {
  kind: 'forEach';
  label: string;
  items: StateSelector<UntypedState, readonly unknown[]>;
  into: string;
  concurrency: number;
  /** A failed child run fails the forEach ('fail') or lands in `state[into][i]` as an error description ('collect'). */
  onItemError: 'fail' | 'collect';
  /** The body run per item in this run, or null when each item is a child run of `child`. */
  body: FlowNode | null;
  child: PipelinePlan | null;
  /**
   * `{ distribute: true }` with an agent or a sequence of agents as the body: the body as declared, from
   * which a hidden child pipeline is made per forEach (core/flow/fan-out.ts); null otherwise.
   */
  distributed: AgentEntry | null;
}
