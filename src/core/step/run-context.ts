import { AsyncLocalStorage } from 'node:async_hooks';
import type { EntityManager } from 'typeorm';
import type { CheckpointStore, Fence, OperationRecord } from '../../contract/checkpoint-store';
import type { Clock } from '../../contract/clock';
import { WaypointError } from '../../contract/errors';
import type { Logger } from '../../contract/logger';
import type { Telemetry } from '../../contract/telemetry';
import { NoTransactionError, type TransactionScope } from './transaction-scope';
import type { RunStreamWriter } from '../stream/run-stream-writer';
import type { CrashHook } from './crash-points';

/** What the runtime knows about the step that is executing, carried through async calls. */
export interface ActiveStep {
  runId: string;
  agentId: string;
  stepName: string;
  /** `agentId/stepName`, or the step's path inside a control-flow tree. */
  stepKey: string;
  /** The step's path when it differs from `agentId/stepName` (control flow): operation keys derive from it. */
  path?: string;
  attempt: number;
  signal: AbortSignal;
  fence: Fence;
  store: CheckpointStore;
  logger: Logger;
  clock: Clock;
  telemetry: Telemetry;
  /** Calls per operation name in this attempt: the ordinal that makes two calls' keys differ. */
  ordinals: Map<string, number>;
  /**
   * The run's operations, read once when the attempt finds it is replaying recorded calls (see
   * `recordedOperation`); null when that read failed.
   */
  recorded?: Promise<Map<string, OperationRecord> | null>;
  /** Operation keys committed by this step (recorded or reused), for `side_effects_committed`. */
  committed: string[];
  /** Set while a side effect runs, so nested side effects are part of the outer one. */
  operation?: ActiveOperation;
  /** The attempt's database transaction, created by its first transactional side effect. */
  transaction?: TransactionScope;
  /** The run's live-output writer (this execution's). */
  stream: RunStreamWriter;
  /**
   * The number of the last stream event the step's row must wait for: this attempt's last part, or the
   * retraction of an earlier attempt of the step; 0 when there is none (the row waits for nothing).
   */
  emitted: number;
  /** Parts this attempt emitted. */
  parts: number;
  /** 'async' durability: resolves once the run's earlier rows are committed (see `LiveInput.rowsDurable`). */
  rowsDurable?: () => Promise<void>;
  /** Set when the attempt has ended (succeeded, failed, timed out, abandoned): a later part is dropped. */
  ended: boolean;
  /**
   * Appends `part` (a JSON value) to the run's live stream, as `ctx.emit` does: for code a step calls,
   * through `currentStep()?.emit(part)`. See `StepContext.emit`.
   */
  emit: (part: unknown) => void;
  /** The test kit's crash hook (core/step/crash-points.ts); undefined outside the kit. */
  crash?: CrashHook;
}

/** The side-effect call in progress, as seen from inside the effect. */
export interface ActiveOperation {
  /** Deterministic idempotency key: pass it to the external system (an Idempotency-Key header). */
  key: string;
  name: string;
  runId: string;
  stepKey: string;
  /** How many times this operation has been started, this call included. */
  attempt: number;
  /**
   * Transactional effects only: a TypeORM `EntityManager` inside the step's transaction, on the store's
   * database. What the effect writes through it commits with the operation record and the checkpoint.
   */
  transaction?: EntityManager;
}

export const stepStorage = new AsyncLocalStorage<ActiveStep>();

/** The step currently executing in this async context, if any. */
export function currentStep(): ActiveStep | undefined {
  return stepStorage.getStore();
}

/**
 * The side effect currently executing, with its idempotency key.
 * Throws `NoActiveOperationError` when called outside a `@SideEffect` method (or `guardedExecute`).
 *
 * @example
 * @SideEffect() async charge(amount: number) {
 *   await payments.charge({ amount }, { idempotencyKey: currentOperation().key });
 * }
 */
export function currentOperation(): ActiveOperation {
  const op = stepStorage.getStore()?.operation;
  if (!op) throw new NoActiveOperationError();
  return op;
}

/**
 * The TypeORM `EntityManager` of the transactional side effect currently executing: its writes commit
 * atomically with the effect's operation record and the step's checkpoint, exactly once however often
 * the run is resumed. Use this manager (not `store.dataSource`) for every write that must be part of it:
 * SQL text (`manager.query(...)`), the query builder, or your entities once they are registered with the
 * store (its `entities` option). Throws `NoTransactionError` outside a transactional side effect.
 *
 * @example
 * @SideEffect({ transactional: true }) async book(entry: LedgerEntry) {
 *   await currentTransaction().insert(LedgerRow, { ...entry, operationKey: currentOperation().key });
 * }
 */
export function currentTransaction(): EntityManager {
  const op = stepStorage.getStore()?.operation;
  if (!op?.transaction) throw new NoTransactionError(op?.name);
  return op.transaction;
}

/** `currentOperation()` outside a side effect. */
export class NoActiveOperationError extends WaypointError {
  constructor() {
    super('NO_ACTIVE_OPERATION', 'currentOperation() was called outside a side effect: call it from a @SideEffect method or a guardedExecute callback.');
  }
}
