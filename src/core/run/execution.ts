import type { Fence, RunStatus } from '../../contract/checkpoint-store';
import type { Agent } from '../../contract/agent';
import type { CrashHook } from '../step/crash-points';
import type { StepRecord } from '../../contract/checkpoint-store';
import type { ChainPosition } from '../history/row-integrity';
import type { Logger } from '../../contract/logger';
import type { PipelinePlan, StepPlan } from '../plan/plan-reader';
import type { Integrity } from '../history/row-integrity';
import type { SharedState } from '../state/state-schema';
import type { TransactionScope } from '../step/transaction-scope';
import type { FanOutRunner } from '../flow/fan-out';
import type { PathEntry } from '../history/path-runs';
import type { RunStreamWriter } from '../stream/run-stream-writer';

/** What the executors share: what one execution is given, how it ends, and how a step attempt is run. */

/** When a step's row must be committed: before the next step starts ('sync'), or while it runs ('async'). */
export type Durability = 'sync' | 'async';

/** Why an executor stops before the end of the plan (given as the stop signal's reason). */
export class PauseRequest {
  constructor(readonly why: string) {}
}

export interface ExecutionOutcome {
  status: RunStatus;
  /** Why the run stopped early (pause reason, awaited signal, abandoned step). */
  detail?: string;
  state: SharedState;
  stepsExecuted: number;
  lastSequence: number;
  /** The executor already recorded the run's end (a control-flow run closes itself). */
  closed?: boolean;
  /** Recorded steps reused by a control-flow run (its replay). */
  stepsReused?: number;
  /** A waiting run: what it waits for (the signal's name), for its stream's `waiting` status. */
  waitingFor?: string;
}

/**
 * What every execution of a run's rows is given, a read-only replay included: the plan, the run, the rows
 * restored from the store. A replay is given nothing more, so it has nothing to write with.
 */
export interface ExecutionInput {
  plan: PipelinePlan;
  runId: string;
  restored: RestoredRun;
  /** A child run's item (a `forEach` over a `@Pipeline` class): `ctx.item` / `ctx.itemIndex` of its steps. */
  item?: { value: unknown; index: number };
  /** The test kit's crash hook (core/step/crash-points.ts), set by the executor; undefined outside the kit and in replays. */
  crash?: CrashHook;
}

/** How a live execution checks and seals what it records (the Waypoint's options, for this pipeline). */
export interface RecordingChecks {
  validateEveryStep: boolean;
  /** strictState: the properties a step's output may set; null when strictState does not apply (nothing checked). */
  strict: ReadonlySet<string> | null;
  integrity: Integrity;
  /** Payloads are encrypted at rest, so `@Secret()` properties may be stored. */
  encrypted: boolean;
}

/** What only a live execution is given: its lease, its stop signal, its logger, retention, and how it runs child runs. */
export interface LiveInput extends ExecutionInput, RecordingChecks {
  fence: Fence;
  /** Aborted by shutdown, a deadline, a cancel or a lost lease; the reason says which. */
  stop: AbortSignal;
  gracePeriodMs: number;
  /** The run's logger (carries runId and pipeline). */
  logger: Logger;
  /** This execution's writer of the run's live output stream (a no-op one when the store keeps no streams). */
  stream: RunStreamWriter;
  /** Folds old checkpoints every `every` steps (retention), or keeps a resume snapshot (`forResume`). */
  compaction?: BoundaryWork;
  /**
   * 'sync' (default): a step's row is committed before the next step starts. 'async': the next step starts
   * while it is written (at most ROWS_IN_FLIGHT rows in flight); see docs/durability-modes.md.
   */
  durability?: Durability;
  /**
   * Set by an 'async' execution for its steps: resolves once every row handed to the store so far is
   * committed (rejects with the failed write's error). Side effects, durable calls, waits, sleeps and child
   * runs await it first, so nothing outside the run happens ahead of the record that led to it.
   */
  rowsDurable?: () => Promise<void>;
  /** Runs (or resumes, or reads the result of) one child run of a `forEach` over a `@Pipeline` class. */
  runChild?: ChildRunner;
  /** Set when a fleet worker executes the run: a `forEach` over a `@Pipeline` class queues its child runs for the fleet. */
  fanOut?: FanOutRunner;
  /** Runs an item of a distributed forEach in process as its hidden child run, when a fleet created one. */
  itemChild?: ItemChildRunner;
}

/**
 * How the runtime runs a child run for a parent's `forEach`; the parent's stop signal pauses it too. With
 * `collect`, a child that already failed or was cancelled is not run again: its status and error are returned.
 */
export type ChildRunner = (
  child: PipelinePlan,
  spec: { runId: string; parentRunId: string; input: Record<string, unknown>; item: unknown; itemIndex: number; signal: AbortSignal; collect?: boolean },
) => Promise<{ status: RunStatus; state: Record<string, unknown>; detail?: string; error?: unknown }>;

/**
 * An item of a distributed agent or sequence body in a run executed without a fleet (a parent resumed
 * outside it): null when the item's hidden child run does not exist, so the parent runs the item itself;
 * else that child run, run or resumed in this process (a completed one runs nothing), with `state` the
 * item's changes for `state[into][i]` once it completed, or the stored error of a failed or cancelled one.
 */
export type ItemChildRunner = (
  plan: PipelinePlan,
  spec: { runId: string; signal: AbortSignal },
) => Promise<{ status: RunStatus; state: Record<string, unknown>; detail?: string; error?: unknown } | null>;

/** Where a step runs in a control-flow tree: its path (unique in the run) and the loop/item it belongs to. */
export interface StepSite {
  path: string;
  iteration?: number;
  item?: unknown;
  itemIndex?: number;
}

export interface AttemptResult {
  output: Record<string, unknown>;
  attempt: number;
  committed: string[];
  startedAt: Date;
  /** Open when a transactional side effect ran: the checkpoint is appended and committed in it. */
  transaction?: TransactionScope;
  /** The number of the last stream event the row waits for (0: none; see `ActiveStep.emitted`). */
  emitted: number;
  /** Parts the attempt emitted (retracted if its row is not written after all). */
  parts: number;
}

/** Marks a step abandoned because of a pause: it is not recorded and runs again on resume. */
export class StepAbandoned extends Error {
  /** `error`, or when it is an abandon without a message (an attempt's own), one that names the step at `path`. */
  static at(error: unknown, path: string): unknown {
    return error instanceof StepAbandoned && !error.message ? new StepAbandoned(`step '${path}' was not completed and runs again on resume`) : error;
  }
}

/** Runs a step's attempts and makes agents: what a control-flow execution borrows from the step executor. */
export interface StepRunner {
  runAttempts(input: LiveInput, step: StepPlan, agent: Agent, state: SharedState, sequence: number, site?: StepSite): Promise<AttemptResult>;
  createAgent(type: PipelinePlan['agents'][number]['type'], saved: string | undefined, runId: string): Agent;
}

/** Everything the runtime needs to continue a run, rebuilt from its rows. */
export interface RestoredRun {
  state: SharedState;
  /** Latest serialized memory per agent id. */
  memories: Map<string, string>;
  /** Paths of the steps already completed (`agentId/stepName` at the top level); a snapshot's stay in runs (`PathSet`). */
  completed: ReadonlySet<string>;
  /** Of those, the ones a base row folded into its state, with no row of their own. */
  folded?: ReadonlySet<string>;
  lastSequence: number;
  /** Where the next row is chained: the run's identity and the link of the last stored row. */
  chain: ChainPosition;
  /** The rows after the newest base row (steps, decisions, patches), which the executor replays by path. */
  rows?: StepRecord[];
  /** The run records its joins and reducer merges as rows (core/flow/join-rows.ts); false for a run of an earlier release. */
  joins?: boolean;
  /** A run restored from a base row: where its replay starts (root entries already folded into `state`). */
  flowStart?: FlowStart;
  /** Set when a checkpoint migration ran: the base row to record before continuing. */
  migration?: { from: string; to: string; base: BasePayload; memories: Record<string, string> };
}

/**
 * Payload of a base row (retention's fold, a migration's rewrite, a resume snapshot): the whole state, the
 * completed step keys, the version they conform to.
 */
export interface BasePayload {
  state: Record<string, unknown>;
  completed: string[];
  /**
   * A resume snapshot's `completed` in compact form (core/history/path-runs.ts): when set, the steps it
   * names come after those of `completed` (empty in a snapshot). Read through `baseOf` (core/history/flow-base.ts).
   */
  completedRuns?: PathEntry[];
  version: string;
  /** Set on a base row written by retention: the digest of the row it replaced, which the next row links to. */
  replaces?: string;
  /**
   * Where the replay starts and what it takes as recorded without rows of its own. Base rows written before
   * one run model (a straight line's) have none: their replay starts at the top, with `completed` folded.
   */
  flow?: FlowBase;
}

/**
 * Where the replay of a control-flow run starts: the first `done` entries of the pipeline's top-level
 * sequence are folded into the base's state (and, when the next one is a loop, its first `iterations`
 * iterations). `doneKeys` names those entries (agent ids, construct labels) so a version whose top level
 * changed under them is caught instead of skipping the wrong entries.
 */
/** Work the executor does every `every` rows at a top-level boundary (retention's compaction or a resume snapshot). */
export interface BoundaryWork {
  every: number;
  compact: (runId: string) => Promise<number>;
  /**
   * True when the work only serves a later resume (a resume snapshot): it is skipped at the boundary after the
   * run's last top-level entry, where the run is about to end. Retention's compaction runs there too.
   */
  forResume?: boolean;
}

export interface FlowStart {
  done: number;
  doneKeys: string[];
  iterations?: number;
  /**
   * At a boundary between two steps of the top-level agent at entry `done`: how many of its steps came
   * before it, so a resume starts that agent there instead of passing its folded steps one by one.
   */
  steps?: number;
}

/** A control-flow base: its start, and the steps and decisions carried in it (a migration's, by path). */
export interface FlowBase extends FlowStart {
  carried: CarriedEntry[];
  /**
   * A resume snapshot's `doneKeys` in compact form (core/history/path-runs.ts), after those of `doneKeys`
   * (empty in a snapshot): a line of 400 agents names them in one entry. Read through `baseOf` (core/history/flow-base.ts).
   */
  doneKeyRuns?: PathEntry[];
}

/** A step, skip, decision or patch carried in a base row instead of a row of its own; taken by path like a row. */
export interface CarriedEntry {
  path: string;
  kind: 'step' | 'skipped' | 'decision' | 'patch';
  /** The step's output, the decision (`{ value }`) or the patch, as stored text. */
  output: string;
}
