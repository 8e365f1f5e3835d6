import { setTimeout as sleep } from 'node:timers/promises';
import type { CheckpointKey, CheckpointQuery, CheckpointWrite, PutOutcome, SaverBackend } from './backend';
import type { BlobRow, CheckpointRow, PruneResult, ThreadInfo, WriteRow } from './records';
import type { LangGraphTables } from './sql-schema';
import { type Row, toBuffer, toCheckpointRow, toWriteRow } from './sql-rows';
import { type SqliteLangGraphStatementName, sqliteLangGraphStatements, sqliteListCheckpoints } from './sql-sqlite';

/** The slice of better-sqlite3's API used here (the package ships no types). */
interface Statement {
  run(params?: object): { changes: number };
  get(params?: object): Row | undefined;
  all(params?: object): Row[];
}
type Transaction<A extends unknown[], R> = ((...args: A) => R) & { immediate(...args: A): R };
export interface SqliteDatabase {
  prepare(sql: string): Statement;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): Transaction<A, R>;
  readonly inTransaction: boolean;
}

/**
 * The LangGraph saver's records on the SQLite database of a Waypoint store (its better-sqlite3 handle).
 * better-sqlite3 is synchronous, so every method is one uninterrupted piece of work; writes run in
 * `BEGIN IMMEDIATE` transactions, which also serialize them against other processes on the same file.
 * The connection is shared with the store: while a transaction of the store's is open on it (a step's
 * transaction spans awaits), the saver waits, so its records never become part of someone else's
 * transaction.
 */
export class SqliteSaverBackend implements SaverBackend {
  readonly name = 'sqlite' as const;
  private readonly stmts: Record<SqliteLangGraphStatementName, Statement>;
  private readonly dynamic = new Map<string, Statement>();
  private readonly putTx: Transaction<[CheckpointWrite, number], PutOutcome>;
  private readonly putWritesTx: Transaction<[WriteRow[]], void>;
  private readonly deleteTx: Transaction<[string], void>;
  private readonly pruneTx: Transaction<[string, number], PruneResult>;

  constructor(
    private readonly db: SqliteDatabase,
    private readonly tables: LangGraphTables,
  ) {
    const texts = sqliteLangGraphStatements(tables);
    this.stmts = Object.fromEntries(Object.entries(texts).map(([k, sql]) => [k, db.prepare(sql)])) as Record<SqliteLangGraphStatementName, Statement>;
    this.putTx = db.transaction((write: CheckpointWrite, now: number): PutOutcome => {
      const thread_id = write.threadId;
      const parent =
        write.parentCheckpointId === null ? undefined : this.stmts.getChannels.get({ thread_id, checkpoint_ns: write.checkpointNs, checkpoint_id: write.parentCheckpointId });
      const { row, blobs, inherited } = write.build(parent ? (parent.channels as string) : null);
      if (inherited.length > 0) {
        const found = this.stmts.countBlobs.get({ thread_id, addresses: JSON.stringify(inherited) });
        if (Number(found?.n) !== inherited.length) return 'blobs-missing';
      }
      this.stmts.touchThread.run({ thread_id, now });
      for (const blob of blobs) this.stmts.insertBlob.run({ thread_id, address: blob.address, type: blob.type, data: toBuffer(blob.data), now });
      this.stmts.upsertCheckpoint.run({ ...checkpointParams(row), now });
      return 'written';
    });
    this.putWritesTx = db.transaction((rows: WriteRow[]) => {
      for (const w of rows) {
        this.stmts.putWrite.run({
          thread_id: w.threadId,
          checkpoint_ns: w.checkpointNs,
          checkpoint_id: w.checkpointId,
          task_id: w.taskId,
          idx: w.idx,
          channel: w.channel,
          type: w.type,
          data: toBuffer(w.data),
          task_path: w.taskPath,
          sha256: w.sha256,
        });
      }
    });
    this.deleteTx = db.transaction((thread_id: string) => {
      for (const stmt of [this.stmts.deleteWrites, this.stmts.deleteBlobs, this.stmts.deleteCheckpoints, this.stmts.deleteThread]) stmt.run({ thread_id });
    });
    this.pruneTx = db.transaction((thread_id: string, keep: number): PruneResult => {
      let checkpoints = 0;
      let writes = 0;
      for (const key of this.stmts.prunable.all({ thread_id, keep })) {
        const params = { thread_id, checkpoint_ns: key.checkpoint_ns, checkpoint_id: key.checkpoint_id };
        checkpoints += this.stmts.deleteCheckpoint.run(params).changes;
        writes += this.stmts.deleteCheckpointWrites.run(params).changes;
      }
      const blobs = this.stmts.collectBlobs.run({ thread_id }).changes;
      return { checkpoints, writes, blobs };
    });
  }

  async putCheckpoint(write: CheckpointWrite): Promise<PutOutcome> {
    return this.exclusive(() => this.putTx.immediate(write, Date.now()));
  }

  async getCheckpoint(threadId: string, checkpointNs: string, checkpointId: string | undefined): Promise<CheckpointRow | undefined> {
    const params = { thread_id: threadId, checkpoint_ns: checkpointNs };
    const row = await this.exclusive(() =>
      checkpointId === undefined ? this.stmts.getLatest.get(params) : this.stmts.getCheckpoint.get({ ...params, checkpoint_id: checkpointId }),
    );
    return row && toCheckpointRow(row);
  }

  async listCheckpoints(query: CheckpointQuery): Promise<CheckpointRow[]> {
    const { text, params } = sqliteListCheckpoints(this.tables, query);
    let stmt = this.dynamic.get(text);
    if (!stmt) this.dynamic.set(text, (stmt = this.db.prepare(text)));
    const prepared = stmt;
    return (await this.exclusive(() => prepared.all(params))).map(toCheckpointRow);
  }

  async getBlobs(threadId: string, addresses: string[]): Promise<Map<string, BlobRow>> {
    const rows = addresses.length === 0 ? [] : await this.exclusive(() => this.stmts.getBlobs.all({ thread_id: threadId, addresses: JSON.stringify(addresses) }));
    return new Map(rows.map((r) => [r.address as string, { address: r.address as string, type: r.type as string, data: r.data as Buffer }]));
  }

  async getWrites(threadId: string, checkpoints: CheckpointKey[]): Promise<WriteRow[]> {
    if (checkpoints.length === 0) return [];
    const keys = JSON.stringify(checkpoints.map((c) => [c.checkpointNs, c.checkpointId]));
    return (await this.exclusive(() => this.stmts.getWrites.all({ thread_id: threadId, keys }))).map(toWriteRow);
  }

  async putWrites(rows: WriteRow[]): Promise<void> {
    await this.exclusive(() => this.putWritesTx.immediate(rows));
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.exclusive(() => this.deleteTx.immediate(threadId));
  }

  async prune(threadId: string, keepLast: number): Promise<PruneResult> {
    return this.exclusive(() => this.pruneTx.immediate(threadId, keepLast));
  }

  async listThreads(options: { updatedBefore?: Date; limit: number }): Promise<ThreadInfo[]> {
    const rows = await this.exclusive(() => this.stmts.listThreads.all({ before: options.updatedBefore?.getTime() ?? null, limit: options.limit }));
    return rows.map((r) => ({ threadId: r.thread_id as string, updatedAt: new Date(Number(r.updated_at)) }));
  }

  async close(): Promise<void> {
    // The database handle belongs to the Waypoint store; closing the store closes it.
  }

  /** Runs `work` once no transaction is open on the shared connection, with no await in between. */
  private async exclusive<T>(work: () => T): Promise<T> {
    await noTransactionOpen(this.db);
    return work();
  }
}

/** Resolves once no transaction is open on the connection; the caller's next synchronous work runs alone on it. */
export async function noTransactionOpen(db: SqliteDatabase): Promise<void> {
  for (let wait = 1; db.inTransaction; wait = Math.min(wait * 2, 20)) await sleep(wait);
}

function checkpointParams(row: CheckpointRow): Row {
  return {
    thread_id: row.threadId,
    checkpoint_ns: row.checkpointNs,
    checkpoint_id: row.checkpointId,
    parent_checkpoint_id: row.parentCheckpointId,
    checkpoint_type: row.checkpointType,
    checkpoint: toBuffer(row.checkpoint),
    metadata_type: row.metadataType,
    metadata: toBuffer(row.metadata),
    channels: row.channels,
    sha256: row.sha256,
  };
}
