import type { AgentEntry } from './flow';

export type { AnyClass, Class, UntypedState } from './class-type';
import type { Class, UntypedState } from './class-type';

/** Backoff policy for a step's (or a side effect's) attempts. */
export interface RetryPolicy {
  /** Total attempts including the first one. Default 1 (no retry). */
  maxAttempts?: number;
  /** Delay before the second attempt. Default 200 ms. */
  initialDelayMs?: number;
  /** Upper bound of any delay. Default 30 s. */
  maxDelayMs?: number;
  /** Multiplier between consecutive delays. Default 2. */
  factor?: number;
  /** Full jitter on each delay (random in [0, delay]). Default true. */
  jitter?: boolean;
  /** Return false to fail at once for this error. `NonRetryableError` is never retried. */
  retryOn?: (error: unknown) => boolean;
}

/** Options of `@Step`. */
export interface StepOptions {
  /** Stable step name used to match recorded steps across versions. Default: the method name. */
  name?: string;
  /** Retries after the first attempt (a number), or a full policy. */
  retries?: number | RetryPolicy;
  /** Per-attempt timeout: the attempt's AbortSignal fires and the attempt fails. */
  timeoutMs?: number;
  /**
   * Runs the step only when this returns true for the state it would see; otherwise the step is recorded
   * as skipped. The answer is recorded either way, so a resumed run never asks again.
   */
  when?: (state: UntypedState) => boolean;
}

/** What a reconcile hook found out about an operation whose outcome was not recorded. */
export type ReconcileOutcome = { happened: true; result?: unknown } | { happened: false };

/** Information handed to a side effect's reconcile hook. */
export interface ReconcileContext {
  runId: string;
  operation: string;
  key: string;
  args: unknown[];
}

/** Options of `@SideEffect`. */
export interface SideEffectOptions {
  /** Operation name, part of the operation key. Default: the method name. */
  name?: string;
  /**
   * Called on resume when the operation started but its outcome was not recorded (a crash in between).
   * Answer whether it happened; without a hook the operation runs again with the same idempotency key.
   */
  reconcile?: (ctx: ReconcileContext) => Promise<ReconcileOutcome> | ReconcileOutcome;
  /** Retries of the operation itself after a failure. */
  retries?: number | RetryPolicy;
  /**
   * Run the effect inside the step's database transaction (the exactly-once path): its writes through
   * `currentTransaction()`, its operation record and the step's checkpoint commit together or not at
   * all. Needs the SQL store (SQLite or PostgreSQL) on the database the effect writes to. Its outcome
   * is never unknown after a crash, so a `reconcile` hook is never called for it.
   */
  transactional?: boolean;
}

/** A checkpoint migration between two pipeline versions. */
export interface CheckpointMigration {
  /** Version (or `1.x` / `1.2.x` wildcard) the stored run was written by. */
  from: string;
  /** Version the migration produces. */
  to: string;
  migrate(checkpoint: MigratableCheckpoint): MigratableCheckpoint | Promise<MigratableCheckpoint>;
}

/** The part of a checkpoint a migration may rewrite. */
export interface MigratableCheckpoint {
  state: Record<string, unknown>;
  memories: Record<string, unknown>;
  /**
   * Completed steps, as `agentId/stepName` keys (for a pipeline with control flow, as paths such as
   * `loop[1]/CodeGen/generate`). A migration may rename or drop entries.
   */
  completedSteps: string[];
  /**
   * Control-flow runs only: the output of each completed step the resumed run replays, by path. Its state is
   * rebuilt from these (the `state` above is where that replay starts), so renaming a state property means
   * renaming it here too; renaming a step's path means renaming its entry here and in `completedSteps`.
   */
  outputs?: Record<string, Record<string, unknown>>;
  /** Control-flow runs only: each recorded decision by path (a `branch` key, a `forEach`'s item list, a loop's stop). */
  decisions?: Record<string, unknown>;
}

/** Options of `@Pipeline`. */
export interface PipelineOptions {
  name: string;
  version: string;
  /**
   * What runs, in order: agent classes and control-flow constructs (`parallel`, `loop`, `branch`,
   * `forEach`), nested freely; an array is a sequence.
   */
  agents: AgentEntry[];
  /** class-validator decorated state class; input and every loaded state are validated against it. */
  state?: Class;
  migrations?: CheckpointMigration[];
  /**
   * The state class is the schema: an input, a step output or a fork's `patchState` that sets a property
   * the class does not declare is refused with `UNDECLARED_STATE` before anything is written, and a
   * `forEach` whose `into` is undeclared is refused when the plan is read. Declared: a field with an
   * initializer, or a property carrying class-validator, class-transformer or Waypoint decorators.
   * Needs `state`. Default: `Waypoint.create({ strictState })`, itself false; this setting wins.
   */
  strictState?: boolean;
  /**
   * This pipeline's durability mode, 'sync' or 'async' (docs/durability-modes.md). Default:
   * `Waypoint.create({ durability })`, itself 'sync'; this setting wins.
   */
  durability?: 'sync' | 'async';
}
