import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { LeaseLostError } from '../../contract/errors';
import { TransactionEndedError } from '../../contract/transaction-errors';
import type { Fence, NewOperation, OperationOutcome, OperationRecord, StepAppend, StoreTransaction } from '../../contract/checkpoint-store';
import type { ConnectionGate } from './connection-gate';
import { toOperation } from './rows';
import { type AppendStatements, type Database, type Statement, beginImmediate, writeAppend } from './sqlite-driver';
import { SAVEPOINT_SQL, closableManager, markTransaction, transactionError } from './transaction-runner';
import { settled } from '../settled';

/** The store's prepared statements a transaction uses. */
export interface TransactionStatements extends AppendStatements {
  fence: Statement;
  getOperation: Statement;
  recordOperation: Statement;
}

export interface SqliteTransactionContext {
  dataSource: DataSource;
  db: Database;
  stmts: TransactionStatements;
  gate: ConnectionGate;
  busyTimeoutMs: number;
}

/**
 * A step's transaction on SQLite. better-sqlite3 gives the store one connection, and TypeORM one shared
 * query runner on it, so the transaction runs on that connection: `BEGIN IMMEDIATE` takes the database's
 * write lock (waiting without blocking the event loop), and the store's `ConnectionGate` makes every
 * other call of this store, other runs' hot-path writes and reads included, wait until COMMIT or
 * ROLLBACK, instead of slipping into the transaction.
 *
 * The trade-off, chosen over a second connection: a second connection would not help, since SQLite has
 * one writer per file and the step's own lease renewals and records would wait for the transaction
 * anyway, and SQLite would then make them fail with SQLITE_BUSY instead of queueing. So on SQLite a
 * transactional step serializes the database from its first transactional effect to its checkpoint;
 * keep what follows that effect in the step short, and use PostgreSQL for many concurrent runs. Other
 * processes' writes wait on SQLite's lock up to their busy timeout.
 */
export class SqliteTransaction implements StoreTransaction<EntityManager> {
  readonly exclusive = true;
  private ended = false;

  private constructor(
    private readonly context: SqliteTransactionContext,
    private readonly runner: QueryRunner,
    readonly manager: EntityManager,
    private readonly closeManager: () => void,
    private readonly release: () => void,
    private readonly runId: string,
  ) {}

  /** Takes the gate, BEGIN IMMEDIATE, then the fence check. Throws `LeaseLostError` when the fence is stale. */
  static async open(context: SqliteTransactionContext, runId: string, fence: Fence): Promise<SqliteTransaction> {
    const { dataSource, db, stmts, gate, busyTimeoutMs } = context;
    const release = await gate.acquire();
    try {
      const runner = dataSource.driver.createQueryRunner('master');
      if (db.inTransaction || runner.isTransactionActive) {
        // plain Error: the clause the store's guard wraps as the cause of a typed store error (beginTransaction).
        throw new Error('the connection is already inside a transaction Waypoint did not open (a transaction on store.dataSource at the same time?)');
      }
      await beginImmediate(db, busyTimeoutMs, busyTimeoutMs);
      if (!stmts.fence.get({ run_id: runId, epoch: fence.epoch })) {
        db.exec('ROLLBACK');
        throw new LeaseLostError(runId, fence.epoch);
      }
      markTransaction(runner, true);
      const { manager, close } = closableManager(dataSource, runner, runId);
      return new SqliteTransaction(context, runner, manager, close, release, runId);
    } catch (error) {
      release();
      throw error;
    }
  }

  getOperation(operationKey: string): Promise<OperationRecord | null> {
    return settled(() => {
      return this.guard('getOperation', () => {
        const row = this.context.stmts.getOperation.get({ operation_key: operationKey });
        return row ? toOperation(row) : null;
      });
    });
  }

  recordOperation(op: NewOperation, outcome: OperationOutcome): Promise<OperationRecord> {
    return settled(() => {
      return this.guard('recordOperation', () => {
        const { stmts } = this.context;
        const params = {
          operation_key: op.operationKey,
          run_id: op.runId,
          step_key: op.stepKey,
          name: op.name,
          state: outcome.state,
          result: outcome.state === 'committed' ? outcome.result : null,
          error: outcome.state === 'failed' ? outcome.error : null,
          now: Date.now(),
        };
        // No row back: already committed, and left as is.
        const row = stmts.recordOperation.get(params) ?? stmts.getOperation.get(params);
        // plain Error: an internal invariant (the upsert returns a row), wrapped typed if it ever breaks.
        if (!row) throw new Error(`operation '${op.operationKey}' was neither recorded nor found`);
        return toOperation(row);
      });
    });
  }

  savepoint(): Promise<void> {
    return settled(() => {
      this.guard('savepoint', () => this.context.db.exec(SAVEPOINT_SQL.set));
    });
  }

  releaseSavepoint(): Promise<void> {
    return settled(() => {
      this.guard('releaseSavepoint', () => this.context.db.exec(SAVEPOINT_SQL.release));
    });
  }

  rollbackToSavepoint(): Promise<void> {
    return settled(() => {
      this.guard('rollbackToSavepoint', () => this.context.db.exec(SAVEPOINT_SQL.rollback));
    });
  }

  appendStep(append: StepAppend): Promise<void> {
    return settled(() => {
      this.guard('appendStep', () => {
        if (!writeAppend(this.context.stmts, append, Date.now())) throw new LeaseLostError(append.step.runId, append.fence.epoch, append.step.stepName);
      });
    });
  }

  commit(): Promise<void> {
    return settled(() => {
      this.guard('commit', () => undefined);
      this.end('COMMIT');
    });
  }

  rollback(): Promise<void> {
    return settled(() => {
      if (!this.ended) this.end('ROLLBACK');
    });
  }

  /** COMMIT (or ROLLBACK) whatever savepoints an effect left open; on a failed COMMIT, roll back. Frees the gate. */
  private end(statement: 'COMMIT' | 'ROLLBACK'): void {
    const { db } = this.context;
    this.ended = true;
    this.closeManager();
    try {
      db.exec(statement);
    } catch (error) {
      try {
        if (db.inTransaction) db.exec('ROLLBACK');
      } catch {
        // The connection is unusable; the error below says so.
      }
      throw transactionError('sqlite', statement.toLowerCase(), this.runId, error);
    } finally {
      markTransaction(this.runner, false);
      this.release();
    }
  }

  private guard<T>(operation: string, fn: () => T): T {
    if (this.ended) throw new TransactionEndedError(this.runId);
    try {
      return fn();
    } catch (error) {
      throw transactionError('sqlite', operation, this.runId, error);
    }
  }
}
