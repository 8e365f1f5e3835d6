import type { BlobRow, CheckpointRow, PruneResult, ThreadInfo, WriteRow } from './records';

/**
 * A checkpoint to write. The row is built only once the parent's channel references are known: a
 * backend reads them inside its atomic section (SQL: after taking the thread's row lock; Redis: before the
 * script, which re-checks the blobs), so a concurrent `prune` cannot delete a blob the new row inherits.
 */
export interface CheckpointWrite {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  parentCheckpointId: string | null;
  /**
   * Builds the row from the parent's stored `channels` (null when there is no parent, or it is missing).
   * `inherited` are the addresses the row references without writing them; they must exist.
   */
  build(parentChannels: string | null): { row: CheckpointRow; blobs: BlobRow[]; inherited: string[] };
}

/** 'written', or 'blobs-missing' when an inherited blob vanished (pruned meanwhile): nothing was written. */
export type PutOutcome = 'written' | 'blobs-missing';

/**
 * A page of checkpoints, newest first: ordered by checkpoint id, then thread id, then namespace, all
 * descending (byte order). `after` is the last row of the previous page (keyset pagination).
 */
export interface CheckpointQuery {
  threadId?: string;
  checkpointNs?: string;
  checkpointId?: string;
  /** Only checkpoints whose id sorts before this one. */
  beforeId?: string;
  after?: { checkpointId: string; threadId: string; checkpointNs: string };
  limit: number;
}

/** Identifies one checkpoint of a thread. */
export interface CheckpointKey {
  checkpointNs: string;
  checkpointId: string;
}

/**
 * What the LangGraph saver needs from a storage backend. Implemented on SQLite and PostgreSQL (through a
 * Waypoint `TypeOrmCheckpointStore`) and on Redis. Backends move records; serialization, encryption and
 * integrity checks happen in the saver, once, for all of them.
 */
export interface SaverBackend {
  readonly name: 'sqlite' | 'postgres' | 'redis';
  putCheckpoint(write: CheckpointWrite): Promise<PutOutcome>;
  /** The checkpoint with this id, or the newest of the namespace when `checkpointId` is undefined. */
  getCheckpoint(threadId: string, checkpointNs: string, checkpointId: string | undefined): Promise<CheckpointRow | undefined>;
  listCheckpoints(query: CheckpointQuery): Promise<CheckpointRow[]>;
  /** The blobs of a thread with these addresses (missing ones are absent from the map). */
  getBlobs(threadId: string, addresses: string[]): Promise<Map<string, BlobRow>>;
  /** Every pending write stored against these checkpoints of a thread, in no particular order. */
  getWrites(threadId: string, checkpoints: CheckpointKey[]): Promise<WriteRow[]>;
  /** Stores writes: a regular write (idx >= 0) never replaces a stored one; a special write (idx < 0) does. */
  putWrites(rows: WriteRow[]): Promise<void>;
  deleteThread(threadId: string): Promise<void>;
  /** Keeps the newest `keepLast` checkpoints of each namespace of the thread; drops the rest, their writes and unreferenced blobs. */
  prune(threadId: string, keepLast: number): Promise<PruneResult>;
  listThreads(options: { updatedBefore?: Date; limit: number }): Promise<ThreadInfo[]>;
  close(): Promise<void>;
}
