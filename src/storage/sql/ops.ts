import type { DataSource, EntityManager } from 'typeorm';
import type { CheckpointStore, Fence, RunStreamStore, StoreTransaction } from '../../contract/checkpoint-store';
import type { GroupCommitStats } from './group-commit';

/** Derived methods of the contract a dialect does not override: the store keeps `CheckpointStore`'s. */
type Derived = 'renewLease' | 'releaseLease' | 'compactSteps' | 'truncateSteps' | 'putOperation';

/**
 * What a dialect provides to `TypeOrmCheckpointStore`: the data methods of the contract (the primitives
 * and the derived methods it does faster), run on the native driver under the DataSource, plus the
 * DataSource itself. The store adds the lifecycle and the error wrapping, so each dialect file holds only
 * its queries.
 */
export type DataOps = Omit<CheckpointStore, 'backend' | 'location' | 'init' | 'close' | 'beginTransaction' | keyof RunStreamStore | Derived>;

export interface DialectOps extends DataOps {
  /** The TypeORM DataSource on the store's connection; on SQLite, TypeORM is loaded on first access. */
  readonly dataSource: DataSource;
  /** Closes the connection (pool or file handle), and the DataSource if one was made. */
  closeConnection(): Promise<void>;
  /** A step's transaction on the store's database, with a TypeORM `EntityManager` inside it. */
  beginTransaction(runId: string, fence: Fence): Promise<StoreTransaction<EntityManager>>;
  /**
   * Pending while a transaction holds the store's only connection (SQLite): every other call waits for
   * it, or it would run inside that transaction. Absent when transactions have connections of their own.
   */
  readonly busy?: Promise<void> | null;
  /** Hands back connections the dialect keeps checked out of its pool (PostgreSQL appends); called before the pool closes. */
  releaseConnections?(): void;
  /** The run-stream methods (postgres-stream.ts, sqlite-stream.ts). */
  readonly streams: RunStreamStore & { dropStream(runId: string): Promise<number>; close?(): Promise<void> };
  /** Group commit counters (PostgreSQL); absent or null when appends are not batched. */
  readonly groupCommitStats?: GroupCommitStats | null;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
