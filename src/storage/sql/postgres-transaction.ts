import type { PoolClient, QueryResult } from 'pg';
import { pg } from '../drivers';
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { LeaseLostError, type WaypointError } from '../../contract/errors';
import { TransactionAbortedError, TransactionEndedError } from '../../contract/transaction-errors';
import type { Fence, NewOperation, OperationOutcome, OperationRecord, StepAppend, StoreTransaction } from '../../contract/checkpoint-store';
import { type Row, pgAppendValues, toOperation } from './rows';
import type { PgTransactionStatements } from './sql-postgres';
import { SAVEPOINT_SQL, closableManager, transactionError } from './transaction-runner';

/** Runs one named prepared statement on a connection (the store's naming, so plans are shared per connection). */
export type PgQuery = (client: PoolClient, text: string, values: unknown[]) => Promise<QueryResult<Row>>;

/**
 * A step's transaction on PostgreSQL: a dedicated pooled connection (a TypeORM query runner, so the
 * effect gets a real `EntityManager` on it) between BEGIN and COMMIT. The fence is checked when it opens
 * (fail fast) and again, authoritatively, by the appendStep inside it: it locks the run row (FOR SHARE), so
 * a lease takeover committed before it rejects the append and one attempted after it waits for COMMIT.
 * The run row is deliberately not locked for the whole step: that would block the lease heartbeat (and
 * a takeover of a hung executor) for as long as the step runs.
 *
 * Other runs, and this step's non-transactional effects, keep using the pool meanwhile; so the pool needs
 * more connections (`poolSize`) than there are transactional steps running at once in the process.
 */
export class PostgresTransaction implements StoreTransaction<EntityManager> {
  readonly exclusive = false;
  private ended = false;

  private constructor(
    private readonly runner: QueryRunner,
    private readonly client: PoolClient,
    readonly manager: EntityManager,
    private readonly closeManager: () => void,
    private readonly sql: PgTransactionStatements,
    private readonly query: PgQuery,
    private readonly runId: string,
  ) {}

  /** BEGIN on a dedicated connection, then the fence check. Throws `LeaseLostError` when the fence is stale. */
  static async open(dataSource: DataSource, sql: PgTransactionStatements, query: PgQuery, runId: string, fence: Fence): Promise<PostgresTransaction> {
    const runner = dataSource.createQueryRunner('master');
    try {
      const client = (await runner.connect()) as PoolClient;
      await runner.startTransaction();
      const res = await query(client, sql.leaseEpoch, [runId]);
      if (res.rows[0]?.lease_epoch !== fence.epoch) throw new LeaseLostError(runId, fence.epoch);
      const { manager, close } = closableManager(dataSource, runner, runId);
      return new PostgresTransaction(runner, client, manager, close, sql, query, runId);
    } catch (error) {
      await discard(runner, error);
      throw error;
    }
  }

  getOperation(operationKey: string): Promise<OperationRecord | null> {
    return this.guard('getOperation', async () => {
      const res = await this.query(this.client, this.sql.getOperation, [operationKey]);
      return res.rows[0] ? toOperation(res.rows[0]) : null;
    });
  }

  recordOperation(op: NewOperation, outcome: OperationOutcome): Promise<OperationRecord> {
    return this.guard('recordOperation', async () => {
      const [result, error] = outcome.state === 'committed' ? [outcome.result, null] : [null, outcome.error];
      const res = await this.query(this.client, this.sql.recordOperation, [op.operationKey, op.runId, op.stepKey, op.name, outcome.state, result, error]);
      if (res.rows[0]) return toOperation(res.rows[0]);
      // Already committed (it was left as is): return it.
      const existing = await this.query(this.client, this.sql.getOperation, [op.operationKey]);
      // plain Error: an internal invariant (the upsert returns a row), wrapped typed if it ever breaks.
      if (!existing.rows[0]) throw new Error(`operation '${op.operationKey}' was neither recorded nor found`);
      return toOperation(existing.rows[0]);
    });
  }

  savepoint(): Promise<void> {
    return this.simple('savepoint', SAVEPOINT_SQL.set);
  }

  releaseSavepoint(): Promise<void> {
    return this.simple('releaseSavepoint', SAVEPOINT_SQL.release);
  }

  rollbackToSavepoint(): Promise<void> {
    return this.simple('rollbackToSavepoint', SAVEPOINT_SQL.rollback);
  }

  appendStep(append: StepAppend): Promise<void> {
    return this.guard('appendStep', async () => {
      const res = await this.query(this.client, this.sql.appendStep, pgAppendValues(append)).catch(rejectDuplicate(append));
      if (res.rowCount === 0) throw new LeaseLostError(append.step.runId, append.fence.epoch, append.step.stepName);
    });
  }

  async commit(): Promise<void> {
    this.assertOpen();
    await this.end('COMMIT');
  }

  async rollback(): Promise<void> {
    if (this.ended) return;
    await this.end('ROLLBACK');
  }

  /**
   * COMMIT or ROLLBACK as plain SQL, whatever savepoints an effect may have left open (TypeORM's own
   * commit would only release the innermost one), then the connection goes back to the pool; a
   * connection that failed here is destroyed instead, since its state is unknown.
   */
  private async end(statement: 'COMMIT' | 'ROLLBACK'): Promise<void> {
    this.ended = true;
    this.closeManager();
    try {
      await this.client.query(statement);
    } catch (error) {
      await discard(this.runner, error);
      throw this.mapError(statement.toLowerCase(), error);
    }
    await this.runner.release();
  }

  private simple(operation: string, text: string): Promise<void> {
    return this.guard(operation, async () => {
      await this.client.query(text);
    });
  }

  private async guard<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    this.assertOpen();
    try {
      return await fn();
    } catch (error) {
      throw this.mapError(operation, error);
    }
  }

  private assertOpen(): void {
    if (this.ended) throw new TransactionEndedError(this.runId);
  }

  private mapError(operation: string, error: unknown): WaypointError {
    return transactionError('postgres', operation, this.runId, error, (e) => (pgCode(e) === '25P02' ? new TransactionAbortedError(this.runId, e) : null));
  }
}

function pgCode(error: unknown): string | undefined {
  const e = error as { code?: unknown; driverError?: { code?: unknown } };
  const code = e?.code ?? e?.driverError?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Gives the connection back after a failure: a ROLLBACK that succeeds leaves it clean for the pool; one
 * that fails means the connection is broken or in an unknown state, so the pool must destroy it (TypeORM
 * does that when the release carries the error).
 */
async function discard(runner: QueryRunner, error: unknown): Promise<void> {
  if (runner.isReleased) return;
  try {
    if (runner.isTransactionActive) await runner.query('ROLLBACK');
    await runner.release();
  } catch {
    const withError = runner as unknown as { releasePostgresConnection?: (err: Error) => Promise<void> };
    // plain Error: a thrown non-Error made an Error for the rollback path, which rethrows it typed.
    const reason = error instanceof Error ? error : new Error(String(error));
    if (typeof withError.releasePostgresConnection === 'function') await withError.releasePostgresConnection(reason);
    else await runner.release().catch(() => undefined);
  }
}

/**
 * An append whose sequence is already taken lost a race with a concurrent writer of the same epoch (the
 * (run_id, sequence) key refused it): the same rejection as a stale fence. Other errors pass through.
 */
export function rejectDuplicate(append: StepAppend): (error: unknown) => never {
  return (error: unknown) => {
    if (error instanceof pg().DatabaseError && error.code === '23505') throw new LeaseLostError(append.step.runId, append.fence.epoch, append.step.stepName);
    throw error;
  };
}

/** An error PostgreSQL reported for a statement (it has a SQLSTATE), as opposed to a lost connection. */
export function isServerError(error: unknown): boolean {
  // Class 08 (connection exception) and 57P (the server is shutting the session down) may end the
  // session around the commit; treat those as a lost connection.
  return error instanceof pg().DatabaseError && typeof error.code === 'string' && !error.code.startsWith('08') && !error.code.startsWith('57P');
}
