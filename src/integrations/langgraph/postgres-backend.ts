import { createHash } from 'node:crypto';
import type { Pool, PoolClient, QueryResult } from 'pg';
import type { CheckpointKey, CheckpointQuery, CheckpointWrite, PutOutcome, SaverBackend } from './backend';
import type { BlobRow, CheckpointRow, PruneResult, ThreadInfo, WriteRow } from './records';
import type { LangGraphTables } from './sql-schema';
import { type PgLangGraphStatements, pgLangGraphStatements, pgListCheckpoints } from './sql-postgres';
import { type Row, toCheckpointRow, toWriteRow } from './sql-rows';

/**
 * The LangGraph saver's records on the PostgreSQL database of a Waypoint store, through the `pg` pool
 * its TypeORM DataSource created. Every statement is a named prepared statement.
 *
 * A checkpoint write is one transaction of two statements: the first upserts the thread row (taking its
 * row lock) and reads the parent's channel references, the second inserts the new blobs and the
 * checkpoint, but only if every inherited blob still exists. `prune` takes the same row lock, so a prune
 * and a write on one thread never interleave; reads take no lock.
 */
export class PostgresSaverBackend implements SaverBackend {
  readonly name = 'postgres' as const;
  private readonly sql: PgLangGraphStatements;
  private readonly names = new Map<string, string>();

  constructor(
    private readonly pool: Pool,
    private readonly tables: LangGraphTables,
  ) {
    this.sql = pgLangGraphStatements(tables);
  }

  async putCheckpoint(write: CheckpointWrite): Promise<PutOutcome> {
    return this.transaction(
      async (client) => {
        const lock = await this.query(client, this.sql.lockThread, [write.threadId, write.checkpointNs, write.parentCheckpointId]);
        const parent = write.parentCheckpointId === null ? null : ((lock.rows[0]?.parent_channels as string | null | undefined) ?? null);
        const { row, blobs, inherited } = write.build(parent);
        const res = await this.query(client, this.sql.insertCheckpoint, [
          row.threadId,
          row.checkpointNs,
          row.checkpointId,
          row.parentCheckpointId,
          row.checkpointType,
          row.checkpoint,
          row.metadataType,
          row.metadata,
          row.channels,
          row.sha256,
          blobs.map((b) => b.address),
          blobs.map((b) => b.type),
          blobs.map((b) => b.data),
          inherited,
        ]);
        return res.rowCount === 1 ? 'written' : 'blobs-missing';
      },
      (outcome) => outcome === 'written',
    );
  }

  async getCheckpoint(threadId: string, checkpointNs: string, checkpointId: string | undefined): Promise<CheckpointRow | undefined> {
    const res =
      checkpointId === undefined
        ? await this.query(this.pool, this.sql.getLatest, [threadId, checkpointNs])
        : await this.query(this.pool, this.sql.getCheckpoint, [threadId, checkpointNs, checkpointId]);
    return res.rows[0] && toCheckpointRow(res.rows[0]);
  }

  async listCheckpoints(query: CheckpointQuery): Promise<CheckpointRow[]> {
    const { text, values } = pgListCheckpoints(this.tables, query);
    return (await this.query(this.pool, text, values)).rows.map(toCheckpointRow);
  }

  async getBlobs(threadId: string, addresses: string[]): Promise<Map<string, BlobRow>> {
    if (addresses.length === 0) return new Map();
    const { rows } = await this.query(this.pool, this.sql.getBlobs, [threadId, addresses]);
    return new Map(rows.map((r) => [r.address as string, { address: r.address as string, type: r.type as string, data: r.data as Buffer }]));
  }

  async getWrites(threadId: string, checkpoints: CheckpointKey[]): Promise<WriteRow[]> {
    if (checkpoints.length === 0) return [];
    const res = await this.query(this.pool, this.sql.getWrites, [threadId, checkpoints.map((c) => c.checkpointNs), checkpoints.map((c) => c.checkpointId)]);
    return res.rows.map(toWriteRow);
  }

  async putWrites(rows: WriteRow[]): Promise<void> {
    const first = rows[0];
    if (!first) return;
    // One putWrites call is one task's batch against one checkpoint: the key columns are shared.
    await this.query(this.pool, this.sql.putWrites, [
      first.threadId,
      first.checkpointNs,
      first.checkpointId,
      first.taskId,
      first.taskPath,
      rows.map((w) => w.idx),
      rows.map((w) => w.channel),
      rows.map((w) => w.type),
      rows.map((w) => w.data),
      rows.map((w) => w.sha256),
    ]);
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.query(this.pool, this.sql.deleteThread, [threadId]);
  }

  async prune(threadId: string, keepLast: number): Promise<PruneResult> {
    return this.transaction(async (client) => {
      const locked = await this.query(client, this.sql.lockThreadForPrune, [threadId]);
      if (locked.rowCount === 0) return { checkpoints: 0, writes: 0, blobs: 0 };
      const pruned = (await this.query(client, this.sql.pruneCheckpoints, [threadId, keepLast])).rows[0];
      const blobs = (await this.query(client, this.sql.collectBlobs, [threadId])).rowCount ?? 0;
      return { checkpoints: Number(pruned.checkpoints), writes: Number(pruned.writes), blobs };
    });
  }

  async listThreads(options: { updatedBefore?: Date; limit: number }): Promise<ThreadInfo[]> {
    const { rows } = await this.query(this.pool, this.sql.listThreads, [options.updatedBefore ?? null, options.limit]);
    return rows.map((r) => ({ threadId: r.thread_id as string, updatedAt: r.updated_at as Date }));
  }

  async close(): Promise<void> {
    // The pool belongs to the Waypoint store; closing the store closes it.
  }

  /** BEGIN ... COMMIT on one pooled connection; rolled back when `fn` throws or `commit(result)` is false. */
  private async transaction<T>(fn: (client: PoolClient) => Promise<T>, commit: (result: T) => boolean = () => true): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query(commit(result) ? 'COMMIT' : 'ROLLBACK');
      return result;
    } catch (err) {
      // A connection that cannot even roll back is dropped from the pool instead of being reused.
      await client.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
      throw err;
    } finally {
      client.release(broken);
    }
  }

  private query(on: Pool | PoolClient, text: string, values: unknown[]): Promise<QueryResult<Row>> {
    return on.query<Row>({ name: this.nameOf(text), text, values });
  }

  /** A stable prepared-statement name per SQL text (pg refuses one name for two texts on a connection). */
  private nameOf(text: string): string {
    let name = this.names.get(text);
    if (!name) {
      name = `waypoint_lg_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      this.names.set(text, name);
    }
    return name;
  }
}
