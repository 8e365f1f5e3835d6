import { LeaseLostError, RunNotFoundError } from '../../contract/errors';
import { type Fence, type StoredStreamEvent, type StreamEvent, checkStreamAppend, checkStreamRead } from '../../contract/checkpoint-store';
import { settled } from '../settled';
import { encodeStreamBatch } from '../stream-rows';
import { StreamWaiters } from '../stream-waiters';
import type { Database, Statement, Transaction } from './sqlite-driver';
import { streamRowsEvents } from './postgres-stream';
import type { Tables } from './sql';
import { type SqliteStreamStatementName, sqliteStreamStatements } from './sql-stream';

/**
 * How often a SQLite waiter reads its run's stream length. SQLite has no notification between
 * processes, so a reader in another process on the same file polls (a cheap primary-key read); a
 * reader on the same store object is woken at once by its appends.
 */
export const SQLITE_STREAM_POLL_MS = 50;

/**
 * The run-stream methods on SQLite: an append is one `BEGIN IMMEDIATE` transaction that moves the run
 * row's counter under its fence and inserts the events (SQLite's single write lock serializes the
 * appenders of a run, across processes too).
 */
export class SqliteStreams {
  private readonly stmts: Record<SqliteStreamStatementName, Statement>;
  private readonly appendTx: Transaction<[string, readonly StreamEvent[], Fence | undefined], number | null>;
  private readonly dropTx: Transaction<[string], number>;
  private readonly waiters = new StreamWaiters(SQLITE_STREAM_POLL_MS);

  constructor(
    db: Database,
    tables: Tables,
    /** Checks the file is still the one opened (sqlite-file-identity.ts); throws when it is not. */
    private readonly checkFile: () => void,
  ) {
    const texts = sqliteStreamStatements(tables);
    this.stmts = Object.fromEntries(Object.entries(texts).map(([k, sql]) => [k, db.prepare(sql)])) as Record<SqliteStreamStatementName, Statement>;
    this.dropTx = db.transaction((runId: string) => {
      let dropped = this.stmts.deleteEvents.run({ run_id: runId }).changes;
      for (const row of this.stmts.deleteBatches.all({ run_id: runId })) dropped += Number(row.count);
      this.stmts.resetLength.run({ run_id: runId });
      return dropped;
    });
    this.appendTx = db.transaction((runId: string, events: readonly StreamEvent[], fence: Fence | undefined) => {
      const head = this.stmts.reserve.get({ run_id: runId, epoch: fence ? fence.epoch : null, count: events.length });
      if (!head) return null;
      const first = Number(head.first);
      this.stmts.insert.run({ run_id: runId, offset: first, count: events.length, body: encodeStreamBatch(events), created_at: Date.now() });
      return first;
    });
  }

  /** Deletes the run's events and resets its counter, in one transaction; returns how many were deleted. */
  dropStream(runId: string): Promise<number> {
    return settled(() => {
      this.checkFile();
      return this.dropTx.immediate(runId);
    });
  }

  /** The events of a deleted run: run inside `deleteRun`'s transaction. */
  deleteEvents(runId: string): void {
    this.stmts.deleteEvents.run({ run_id: runId });
    this.stmts.deleteBatches.run({ run_id: runId });
  }

  appendEvents(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number> {
    return settled(() => {
      checkStreamAppend(runId, events);
      this.checkFile();
      const first = this.appendTx.immediate(runId, events, fence);
      if (first === null) throw fence ? new LeaseLostError(runId, fence.epoch) : new RunNotFoundError(runId);
      this.waiters.notify(runId);
      return first;
    });
  }

  readEvents(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
    return settled(() => {
      const max = checkStreamRead(runId, from, limit);
      this.checkFile();
      return streamRowsEvents(this.stmts.read.all({ run_id: runId, from, limit: max }), from, max, (value) => new Date(Number(value)));
    });
  }

  streamLength(runId: string): Promise<number> {
    return settled(() => {
      this.checkFile();
      const row = this.stmts.length.get({ run_id: runId });
      return row ? Number(row.stream_length) : 0;
    });
  }

  async waitForEvents(runId: string, from: number, signal: AbortSignal): Promise<boolean> {
    checkStreamRead(runId, from);
    return this.waiters.wait(runId, from, signal, () => this.streamLength(runId));
  }
}
