import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { WaypointError, storeFailure } from '../../contract/errors';
import { TransactionEndedError } from '../../contract/transaction-errors';

/**
 * What the PostgreSQL and SQLite transactions of the store share: the savepoint SQL, the effect's
 * EntityManager that goes dead with its transaction, the runner's transaction bookkeeping, and the
 * error mapping. Savepoint statements are pure strings, the same in both dialects.
 */

/** The runtime runs one transactional effect at a time, so one savepoint name is enough. */
export const SAVEPOINT_SQL = {
  set: 'SAVEPOINT waypoint_effect',
  release: 'RELEASE SAVEPOINT waypoint_effect',
  /** ROLLBACK TO keeps the savepoint defined; releasing it too keeps the savepoint stack flat. */
  rollback: 'ROLLBACK TO SAVEPOINT waypoint_effect; RELEASE SAVEPOINT waypoint_effect',
} as const;

/** Runner methods that send SQL; refused once the transaction has ended. */
const SENDS_SQL = new Set<PropertyKey>(['query', 'stream', 'startTransaction', 'commitTransaction', 'rollbackTransaction']);

/**
 * An EntityManager on `runner` that refuses every query once `close()` is called. An effect still running
 * after its transaction ended (its step attempt timed out) must not write outside of it: on SQLite the
 * runner is TypeORM's one shared runner, which would otherwise run the write in autocommit, and on
 * PostgreSQL the pooled connection may already serve someone else.
 *
 * @example
 * const { manager, close } = closableManager(dataSource, runner, runId);
 * await manager.query('SELECT 1'); close(); await manager.query('SELECT 1'); // rejects: TRANSACTION_ENDED
 */
export function closableManager(dataSource: DataSource, runner: QueryRunner, runId: string): { manager: EntityManager; close: () => void } {
  let closed = false;
  let manager: EntityManager;
  const guarded = new Proxy(runner, {
    get(target, property, receiver) {
      // Once closed, report "not released" so TypeORM's managers reach the refusing `query` below and the
      // effect gets TRANSACTION_ENDED rather than TypeORM's generic released-runner error.
      if (property === 'isReleased') return closed ? false : target.isReleased;
      // TypeORM hands `queryRunner.manager` to the callback of `manager.transaction(...)`.
      if (property === 'manager') return manager;
      if (closed && SENDS_SQL.has(property)) return () => Promise.reject(new TransactionEndedError(runId));
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
  manager = dataSource.createEntityManager(guarded);
  return { manager, close: () => (closed = true) };
}

/**
 * Tells TypeORM's runner that a transaction is (or is no longer) open, when the store opened or ended it
 * with its own SQL: the effect's `manager.transaction(...)` then nests as a savepoint, and `save()` does
 * not try to start a transaction of its own inside ours.
 */
export function markTransaction(runner: QueryRunner, open: boolean): void {
  Object.assign(runner, { isTransactionActive: open, transactionDepth: open ? 1 : 0 });
}

/**
 * Typed errors pass through; a driver failure inside a transaction becomes `STORE_UNAVAILABLE` or `STORE_REJECTED` (storeFailure),
 * except what `special` recognizes (PostgreSQL's "transaction is aborted").
 */
export function transactionError(backend: string, operation: string, runId: string, error: unknown, special?: (error: unknown) => WaypointError | null): WaypointError {
  if (error instanceof WaypointError) return error;
  return special?.(error) ?? storeFailure(backend, `transaction ${operation}`, error, runId);
}
