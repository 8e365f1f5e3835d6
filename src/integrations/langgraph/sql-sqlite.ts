import type { CheckpointQuery } from './backend';
import type { LangGraphTables } from './sql-schema';
import { CHECKPOINT_COLUMNS, WRITE_COLUMNS } from './sql-postgres';

/**
 * SQLite SQL text of the LangGraph saver, with named parameters (`@name`, bound from an object by
 * better-sqlite3). Variable-length inputs travel as one JSON array parameter read with `json_each`, so
 * every statement is prepared once. Times are INTEGER epoch milliseconds.
 */

const CHECKPOINT_LIST = CHECKPOINT_COLUMNS.join(', ');

export type SqliteLangGraphStatementName = keyof ReturnType<typeof sqliteLangGraphStatements>;

export function sqliteLangGraphStatements(t: LangGraphTables) {
  return {
    touchThread: `INSERT INTO ${t.threads} (thread_id, created_at, updated_at) VALUES (@thread_id, @now, @now)
ON CONFLICT (thread_id) DO UPDATE SET updated_at = excluded.updated_at`,
    getChannels: `SELECT channels FROM ${t.checkpoints} WHERE thread_id = @thread_id AND checkpoint_ns = @checkpoint_ns AND checkpoint_id = @checkpoint_id`,
    /** @addresses: JSON array of addresses. */
    countBlobs: `SELECT count(*) AS n FROM ${t.blobs} WHERE thread_id = @thread_id AND address IN (SELECT value FROM json_each(@addresses))`,
    insertBlob: `INSERT INTO ${t.blobs} (thread_id, address, type, data, created_at) VALUES (@thread_id, @address, @type, @data, @now)
ON CONFLICT (thread_id, address) DO NOTHING`,
    upsertCheckpoint: `INSERT INTO ${t.checkpoints} (${CHECKPOINT_LIST}, created_at)
VALUES (@thread_id, @checkpoint_ns, @checkpoint_id, @parent_checkpoint_id, @checkpoint_type, @checkpoint, @metadata_type, @metadata, @channels, @sha256, @now)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
  parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint_type = excluded.checkpoint_type, checkpoint = excluded.checkpoint,
  metadata_type = excluded.metadata_type, metadata = excluded.metadata, channels = excluded.channels, sha256 = excluded.sha256,
  created_at = excluded.created_at`,
    getCheckpoint: `SELECT ${CHECKPOINT_LIST} FROM ${t.checkpoints} WHERE thread_id = @thread_id AND checkpoint_ns = @checkpoint_ns AND checkpoint_id = @checkpoint_id`,
    getLatest: `SELECT ${CHECKPOINT_LIST} FROM ${t.checkpoints} WHERE thread_id = @thread_id AND checkpoint_ns = @checkpoint_ns ORDER BY checkpoint_id DESC LIMIT 1`,
    /** @addresses: JSON array of addresses. */
    getBlobs: `SELECT address, type, data FROM ${t.blobs} WHERE thread_id = @thread_id AND address IN (SELECT value FROM json_each(@addresses))`,
    /** @keys: JSON array of [ns, id] pairs. */
    getWrites: `SELECT ${WRITE_COLUMNS.join(', ')} FROM ${t.writes}
WHERE thread_id = @thread_id AND (checkpoint_ns, checkpoint_id) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(@keys))`,
    putWrite: `INSERT INTO ${t.writes} (${WRITE_COLUMNS.join(', ')})
VALUES (@thread_id, @checkpoint_ns, @checkpoint_id, @task_id, @idx, @channel, @type, @data, @task_path, @sha256)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
  channel = excluded.channel, type = excluded.type, data = excluded.data, task_path = excluded.task_path, sha256 = excluded.sha256
WHERE excluded.idx < 0`,
    deleteWrites: `DELETE FROM ${t.writes} WHERE thread_id = @thread_id`,
    deleteBlobs: `DELETE FROM ${t.blobs} WHERE thread_id = @thread_id`,
    deleteCheckpoints: `DELETE FROM ${t.checkpoints} WHERE thread_id = @thread_id`,
    deleteThread: `DELETE FROM ${t.threads} WHERE thread_id = @thread_id`,
    /** The checkpoints past the newest @keep of each namespace. */
    prunable: `SELECT checkpoint_ns, checkpoint_id FROM (
  SELECT checkpoint_ns, checkpoint_id, row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) AS rn
  FROM ${t.checkpoints} WHERE thread_id = @thread_id
) WHERE rn > @keep`,
    deleteCheckpoint: `DELETE FROM ${t.checkpoints} WHERE thread_id = @thread_id AND checkpoint_ns = @checkpoint_ns AND checkpoint_id = @checkpoint_id`,
    deleteCheckpointWrites: `DELETE FROM ${t.writes} WHERE thread_id = @thread_id AND checkpoint_ns = @checkpoint_ns AND checkpoint_id = @checkpoint_id`,
    collectBlobs: `DELETE FROM ${t.blobs} WHERE thread_id = @thread_id AND address NOT IN (
  SELECT json_extract(e.value, '$[1]') FROM ${t.checkpoints} c, json_each(c.channels) e WHERE c.thread_id = @thread_id
)`,
    listThreads: `SELECT thread_id, updated_at FROM ${t.threads} WHERE @before IS NULL OR updated_at < @before ORDER BY updated_at, thread_id LIMIT @limit`,
  };
}

/**
 * A page of checkpoints, newest first (see {@link CheckpointQuery}).
 *
 * @example
 * sqliteListCheckpoints(tables, { threadId: 't', limit: 10 }).text // '... WHERE thread_id = @thread_id ORDER BY ... LIMIT @limit'
 */
export function sqliteListCheckpoints(t: LangGraphTables, q: CheckpointQuery): { text: string; params: Record<string, unknown> } {
  const where: string[] = [];
  const params: Record<string, unknown> = { limit: q.limit };
  const add = (condition: string, values: Record<string, unknown>) => {
    where.push(condition);
    Object.assign(params, values);
  };
  if (q.threadId !== undefined) add('thread_id = @thread_id', { thread_id: q.threadId });
  if (q.checkpointNs !== undefined) add('checkpoint_ns = @checkpoint_ns', { checkpoint_ns: q.checkpointNs });
  if (q.checkpointId !== undefined) add('checkpoint_id = @checkpoint_id', { checkpoint_id: q.checkpointId });
  if (q.beforeId !== undefined) add('checkpoint_id < @before_id', { before_id: q.beforeId });
  if (q.after !== undefined) {
    const a = q.after;
    add('(checkpoint_id, thread_id, checkpoint_ns) < (@after_id, @after_thread, @after_ns)', { after_id: a.checkpointId, after_thread: a.threadId, after_ns: a.checkpointNs });
  }
  const text =
    `SELECT ${CHECKPOINT_LIST} FROM ${t.checkpoints}` +
    (where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '') +
    ` ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT @limit`;
  return { text, params };
}
