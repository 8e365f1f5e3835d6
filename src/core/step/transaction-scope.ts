import { supportsTransactions, type NewOperation, type StepAppend, type StoreTransaction } from '../../contract/checkpoint-store';
import type { CheckpointStore, Fence } from '../../contract/checkpoint-store';
import type { Logger } from '../../contract/logger';
import { EffectAfterTransactionError, NoTransactionError, TransactionAbortedError, TransactionEndedError, TransactionsUnsupportedError } from '../../contract/transaction-errors';
import { describeError } from '../../contract/errors';

export { EffectAfterTransactionError, NoTransactionError, TransactionAbortedError, TransactionEndedError, TransactionsUnsupportedError };

/**
 * What a transaction scope needs of the step it belongs to (the runtime's `ActiveStep` has all of it);
 * named here so this file does not import `run-context`, which imports it.
 */
export interface ScopedStep {
  runId: string;
  stepKey: string;
  logger: Logger;
  store: CheckpointStore;
  fence: Fence;
}

/**
 * The database transaction of one step attempt, opened lazily by its first transactional side effect.
 * Transactional effects run in it one at a time (each inside a savepoint, so a failed effect is undone
 * alone and can be retried); the step's checkpoint row is appended in it and COMMIT makes all of it
 * durable at once. Any failure, pause or crash before that rolls all of it back and the step runs again.
 *
 * Failed attempts are recorded inside the transaction too; when it rolls back, they are written again
 * outside it, so the operations log still shows what failed.
 */
export class TransactionScope {
  private opening: Promise<StoreTransaction> | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private ended = false;
  private readonly failures: { op: NewOperation; error: string }[] = [];

  constructor(private readonly step: ScopedStep) {}

  /** Runs `fn` in the step's transaction, opening it at the first call; calls run one after another. */
  run<T>(operation: string, fn: (tx: StoreTransaction) => Promise<T>): Promise<T> {
    const next = this.queue.then(async () => fn(await this.open(operation)));
    this.queue = next.catch(() => undefined);
    return next;
  }

  /**
   * False while an exclusive transaction (SQLite's single write lock) is open: a write outside it would
   * wait for the end of the step that is waiting for it.
   */
  async allowsOutsideWrites(): Promise<boolean> {
    if (this.ended || !this.opening) return true;
    const tx = await this.opening.catch(() => null);
    return tx === null || !tx.exclusive || this.ended;
  }

  /** Remembers a failed attempt, to be written outside the transaction should it roll back. */
  noteFailure(op: NewOperation, error: string): void {
    this.failures.push({ op, error });
  }

  /**
   * Appends the step's checkpoint row in the transaction and commits it (or, when no transactional
   * effect ever opened it, appends through the store as usual). On any failure the transaction is
   * rolled back and the error is rethrown: the step did not complete.
   */
  async commit(append: StepAppend): Promise<void> {
    await this.queue; // an effect the step did not await still belongs to its transaction
    if (this.ended) throw new TransactionEndedError(this.step.runId, this.step.stepKey);
    if (!this.opening) return this.step.store.appendStep(append);
    try {
      const tx = await this.opening;
      await tx.appendStep(append);
      await tx.commit();
      this.ended = true;
      this.failures.length = 0;
    } catch (error) {
      await this.rollback();
      throw error;
    }
  }

  /**
   * Rolls the transaction back (idempotent; a no-op after commit). Does not wait for an effect still
   * running: the handle refuses its later writes. Then records the failed attempts outside it.
   */
  async rollback(): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    const tx = this.opening ? await this.opening.catch(() => null) : null;
    if (!tx) return;
    const { runId, stepKey, logger, store, fence } = this.step;
    try {
      await tx.rollback();
    } catch (error) {
      logger.warn('transaction rollback failed; the database discards it with the connection', { runId, step: stepKey, error: describeError(error) });
    }
    for (const { op, error } of this.failures.splice(0)) {
      try {
        const record = await store.beginOperation(op, fence);
        if (record.state !== 'committed') await store.finishOperation(op.operationKey, { state: 'failed', error }, { ...fence, runId });
      } catch (recordError) {
        logger.warn('could not record a failed transactional side effect after rollback', { runId, step: stepKey, operation: op.name, error: describeError(recordError) });
      }
    }
  }

  private open(operation: string): Promise<StoreTransaction> {
    const { runId, stepKey, store, fence } = this.step;
    if (this.ended) return Promise.reject(new TransactionEndedError(runId, stepKey, operation));
    if (!this.opening) {
      if (!supportsTransactions(store)) {
        return Promise.reject(new TransactionsUnsupportedError(runId, stepKey, operation, `${store.constructor.name}, backend '${store.backend}'`));
      }
      this.opening = store.beginTransaction(runId, fence);
    }
    return this.opening;
  }
}
