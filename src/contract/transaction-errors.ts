import { WaypointError } from './errors';

/** A transactional side effect was used with a store that has no transactions (memory, Redis, a wrapper). */
export class TransactionsUnsupportedError extends WaypointError {
  constructor(runId: string, step: string, operation: string, store: string) {
    super(
      'TRANSACTIONS_UNSUPPORTED',
      `Side effect '${operation}' in step '${step}' of run '${runId}' asked for a transaction, but the checkpoint store ` +
        `(${store}) cannot give one. Nothing ran. Use the SQL store on the database the effect writes to ` +
        `(sqliteStorage() or postgresStorage()), or drop { transactional: true } from the effect.`,
      { runId, step },
    );
  }
}

/**
 * On SQLite, a non-transactional side effect was called after the step's transaction was opened: that
 * transaction holds the database's only write lock, so the effect could not be recorded on its own.
 */
export class EffectAfterTransactionError extends WaypointError {
  constructor(runId: string, step: string, operation: string, backend: string) {
    super(
      'EFFECT_AFTER_TRANSACTION',
      `Side effect '${operation}' in step '${step}' of run '${runId}' is not transactional and was called after a ` +
        `transactional side effect opened the step's transaction. On ${backend} that transaction holds the database's only ` +
        `write lock, so this effect could not be recorded on its own. Call non-transactional effects before the first ` +
        `transactional one in the step, make this one transactional, or use PostgreSQL. Nothing ran.`,
      { runId, step },
    );
  }
}

/** `currentTransaction()` outside a transactional side effect. */
export class NoTransactionError extends WaypointError {
  constructor(operation?: string) {
    super(
      'NO_TRANSACTION',
      (operation ? `Side effect '${operation}' is not transactional, so it has no transaction` : 'currentTransaction() was called outside a side effect') +
        `. Mark the method @SideEffect({ transactional: true }) (or pass { transactional: true } to guardedExecute) and call currentTransaction() inside it.`,
    );
  }
}

/** The step's transaction was used after it ended (an effect still running after its step attempt was over). */
export class TransactionEndedError extends WaypointError {
  constructor(runId: string, step?: string, operation?: string) {
    super(
      'TRANSACTION_ENDED',
      `The transaction of ${step ? `step '${step}' of ` : ''}run '${runId}' has already ended (the step attempt completed, failed or timed out)` +
        (operation ? `, so side effect '${operation}' cannot use it` : '') +
        `. Nothing was written. Await every transactional side effect inside its step.`,
      { runId, step },
    );
  }
}

/** PostgreSQL aborted the step's transaction after a statement in it failed; nothing more can be written in it. */
export class TransactionAbortedError extends WaypointError {
  constructor(runId: string, cause: unknown) {
    super(
      'TRANSACTION_ABORTED',
      `A statement in the transaction of run '${runId}' failed earlier and PostgreSQL aborted the transaction, so nothing more ` +
        `can be written in it and it will be rolled back. Let the error propagate out of the side effect (it is then retried ` +
        `or fails cleanly), or wrap a statement that may fail in manager.transaction(...) to give it its own savepoint.`,
      { runId, cause },
    );
  }
}
