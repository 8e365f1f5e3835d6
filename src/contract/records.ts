// The records a checkpoint store keeps and the values its methods take (see `CheckpointStore` in
// checkpoint-store.ts, which re-exports all of them). Plain data: no behaviour but `swapCount`.

/** Where a run stands; `TERMINAL_STATUSES` end it (a failed run can still be resumed). */
export type RunStatus = 'running' | 'paused' | 'waiting' | 'completed' | 'failed' | 'cancelled';

export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set<RunStatus>(['completed', 'failed', 'cancelled']);

/** Statuses no transition leaves: a failed run can still be resumed or cancelled, these cannot. */
export const FINAL_STATUSES: ReadonlySet<RunStatus> = new Set<RunStatus>(['completed', 'cancelled']);

export interface RunRecord {
  runId: string;
  pipelineName: string;
  pipelineVersion: string;
  status: RunStatus;
  /** Agent index of the next step to run (the plan position after the last completed step). */
  cursorAgent: number;
  /** Step index (within its agent) of the next step to run. */
  cursorStep: number;
  /**
   * Sequence of the last recorded step; 0 when none. Sequences start at 1 and have no gaps. A store may
   * derive it (and the cursor, and `updatedAt`) from its last step row instead of rewriting the run on
   * every append (the SQL stores do, from schema V5).
   */
  lastSequence: number;
  /** Serialized pipeline input. */
  input: string;
  /** Serialized environment metadata (host, pid, node version) of the process that created the run. */
  metadata: string;
  leaseOwner: string | null;
  /** Fencing token: incremented by every lease acquisition. 0 when never leased. */
  leaseEpoch: number;
  leaseExpiresAt: Date | null;
  /** Serialized error of a failed run. */
  error: string | null;
  /** What a person should do next, in words. */
  resumeHint: string | null;
  createdAt: Date;
  /** The last write to the run: its creation, a status change or patch, or the completion of its last step. */
  updatedAt: Date;
  /**
   * The run this one is a child of (a `forEach` over a `@Pipeline` class), or null for a top-level run.
   * Absent on rows written before child runs existed; read as null.
   */
  parentRunId?: string | null;
}

export type NewRun = Pick<RunRecord, 'runId' | 'pipelineName' | 'pipelineVersion' | 'input' | 'metadata'> & Partial<Pick<RunRecord, 'parentRunId'>>;

export type StepStatus = 'completed' | 'failed' | 'skipped';

export interface StepRecord {
  runId: string;
  sequence: number;
  checkpointId: string;
  agentIndex: number;
  agentId: string;
  stepIndex: number;
  stepName: string;
  status: StepStatus;
  /** Serialized partial state update returned by the step. */
  output: string;
  /** Serialized memory of the agent after the step, or null when unchanged since its previous step. */
  memory: string | null;
  idempotencyKey: string;
  sideEffectsCommitted: boolean;
  startedAt: Date;
  completedAt: Date;
  attempt: number;
  /** Hex SHA-256 (or HMAC) of the canonical payload, checked on load. */
  sha256: string;
  /**
   * Where the step sits in a pipeline with control flow (`parallel[1]/Docs/search`,
   * `forEach(reviews)[17]/FileReviewer/review`), or the path of a decision row. Null (or absent, on rows
   * written before control flow existed) for a step of a straight line, whose path is `agentId/stepName`.
   */
  path?: string | null;
}

/**
 * The run's cursor, status and hint after a step append, applied atomically with it. A store may skip
 * writing the run itself when the status and hint are unchanged (the common `running`, no hint, case) and
 * derive the cursor from the step it recorded; it must write them when they change.
 */
export interface CursorUpdate {
  cursorAgent: number;
  cursorStep: number;
  status: RunStatus;
  resumeHint: string | null;
}

export interface Fence {
  /** The writer's lease epoch; the write applies only if it is still the run's current epoch. */
  epoch: number;
}

export interface StepAppend {
  step: StepRecord;
  run: CursorUpdate;
  fence: Fence;
}

export interface RunPatch {
  status?: RunStatus;
  /** Set when a checkpoint migration moved the run to a new pipeline version. */
  pipelineVersion?: string;
  cursorAgent?: number;
  cursorStep?: number;
  error?: string | null;
  resumeHint?: string | null;
}

export interface LeaseGrant {
  owner: string;
  epoch: number;
  expiresAt: Date;
}

export type OperationState = 'started' | 'committed' | 'failed';

export interface OperationRecord {
  operationKey: string;
  runId: string;
  /** `agentId/stepName` of the step that ran the operation. */
  stepKey: string;
  name: string;
  state: OperationState;
  /** Serialized result of a committed operation. */
  result: string | null;
  /** Serialized error of a failed attempt. */
  error: string | null;
  attempts: number;
  createdAt: Date;
  updatedAt: Date;
}

export type NewOperation = Pick<OperationRecord, 'operationKey' | 'runId' | 'stepKey' | 'name'>;

/** An operation record as `CheckpointStore.writeOperation` writes it: the store stamps the times itself. */
export type OperationWrite = Omit<OperationRecord, 'createdAt' | 'updatedAt'>;

/**
 * When `CheckpointStore.writeOperation` writes: under the run's lease epoch (an executor's side effect;
 * a committed record is never overwritten), or only if no record has the key (a signal, from outside any
 * executor: fencing it would stop the run's executor).
 */
export type OperationCondition = { fence: Fence } | { ifAbsent: true };

export interface RunFilter {
  status?: RunStatus | RunStatus[];
  pipelineName?: string;
  /** Runs updated at or after this instant. */
  since?: Date;
  /** Only the child runs of this run. */
  parentRunId?: string;
  limit?: number;
}

export interface LoadedRun {
  run: RunRecord;
  /** Every step row of the run, ordered by sequence. */
  steps: StepRecord[];
}

/** Where a run resumes: the plan position of its next step. */
export type RunCursor = Pick<RunRecord, 'cursorAgent' | 'cursorStep'>;

/**
 * A change `CheckpointStore.replaceSteps` applies to a run's step log, all or nothing: the rows with
 * `fromSequence <= sequence <= toSequence` are replaced by `rows`.
 *
 * @example
 * // retention: fold every row up to 40 into one base row at 40, if any row older than 40 is left
 * await store.replaceSteps(runId, { fromSequence: 1, toSequence: 40, rows: [base], onlyIfBefore: 40 });
 * // fallback past a corrupted row 7: drop it and everything after it, and rewind the run, fenced
 * await store.replaceSteps(runId, { fromSequence: 7, rows: [], fence, cursor: { cursorAgent: 1, cursorStep: 0 } });
 */
export interface StepsChange {
  /** First sequence of the range (inclusive). */
  fromSequence: number;
  /** Last sequence of the range (inclusive); absent: to the end of the log (every later row). */
  toSequence?: number;
  /**
   * The rows that take the range's place, ascending, each with a sequence inside the range; none drops
   * the range. A row replacing one at its own sequence keeps the cursor stored with that row.
   */
  rows: readonly StepRecord[];
  /** Applied only while this is the run's current lease epoch; otherwise nothing is written and `LeaseLostError` is thrown. */
  fence?: Fence;
  /** Applied only when the run has a step row with a sequence below this; otherwise a no-op (nothing older to fold). */
  onlyIfBefore?: number;
  /**
   * For a change that moves the log's end: the run's cursor, written with it; its `lastSequence`
   * becomes the last row the log keeps (0 when none). Absent: the run row is untouched.
   */
  cursor?: RunCursor;
}

/** One compare-and-swap of a stored payload: it becomes `to` only where it still equals `from`. */
export interface PayloadSwap {
  from: string;
  to: string;
}

/**
 * Payloads of one run to replace in place (`CheckpointStore.rewritePayloads`), each a compare-and-swap.
 * At most one swap per field; a null field (no memory, no error) has nothing to swap.
 */
export interface PayloadRewrite {
  /** The run row's serialized input. */
  input?: PayloadSwap;
  /** The run row's serialized error. */
  error?: PayloadSwap;
  /** Step rows by sequence: their output and memory. */
  steps?: { sequence: number; output?: PayloadSwap; memory?: PayloadSwap }[];
  /** Operation records of this run by key: their result and error. */
  operations?: { operationKey: string; result?: PayloadSwap; error?: PayloadSwap }[];
}

/** What `rewritePayloads` did: every swap given is counted once, in one of the two. */
export interface RewriteOutcome {
  /** Swaps applied: the stored value equalled `from` and is now `to`. */
  rewritten: number;
  /** Swaps not applied: the value was changed meanwhile, or its row (or the run) is gone. */
  skipped: number;
}

/** What a transaction writes for one attempt of a transactional side effect. */
export type OperationOutcome = { state: 'committed'; result: string } | { state: 'failed'; error: string };

/**
 * How many swaps a rewrite holds (what `rewritePayloads` counts as rewritten plus skipped).
 *
 * @example
 * swapCount({ input: { from: 'a', to: 'b' }, steps: [{ sequence: 1, output: { from: 'c', to: 'd' } }] }); // 2
 */
export function swapCount(rewrite: PayloadRewrite): number {
  let count = (rewrite.input ? 1 : 0) + (rewrite.error ? 1 : 0);
  for (const step of rewrite.steps ?? []) count += (step.output ? 1 : 0) + (step.memory ? 1 : 0);
  for (const op of rewrite.operations ?? []) count += (op.result ? 1 : 0) + (op.error ? 1 : 0);
  return count;
}
