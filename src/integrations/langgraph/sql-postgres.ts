import type { BuiltQuery } from '../../storage/sql/sql';
import type { CheckpointQuery } from './backend';
import type { LangGraphTables } from './sql-schema';

/**
 * PostgreSQL SQL text of the LangGraph saver: pure functions of the table names, unit-tested as strings.
 * Variable-length inputs travel as arrays (`unnest`), so every statement has one fixed text and is
 * prepared once per pooled connection.
 */

/** Columns of a checkpoint row, in the order every SELECT returns them. */
export const CHECKPOINT_COLUMNS = [
  'thread_id',
  'checkpoint_ns',
  'checkpoint_id',
  'parent_checkpoint_id',
  'checkpoint_type',
  'checkpoint',
  'metadata_type',
  'metadata',
  'channels',
  'sha256',
] as const;

export const WRITE_COLUMNS = ['thread_id', 'checkpoint_ns', 'checkpoint_id', 'task_id', 'idx', 'channel', 'type', 'data', 'task_path', 'sha256'] as const;

const CHECKPOINT_LIST = CHECKPOINT_COLUMNS.join(', ');

export interface PgLangGraphStatements {
  /** $1 thread, $2 ns, $3 parent id (or null). Upserts the thread row, which locks it until COMMIT, and reads the parent's channels. */
  lockThread: string;
  /** $1..$10 the checkpoint row, $11..$13 new blobs (address[], type[], data[]), $14 inherited addresses. Returns a row when written. */
  insertCheckpoint: string;
  /** $1 thread, $2 ns, $3 id. */
  getCheckpoint: string;
  /** $1 thread, $2 ns: the newest checkpoint of the namespace. */
  getLatest: string;
  /** $1 thread, $2 address[]. */
  getBlobs: string;
  /** $1 thread, $2 ns[], $3 id[]. */
  getWrites: string;
  /** $1 thread, $2 ns, $3 id, $4 task, $5 task path, $6 idx[], $7 channel[], $8 type[], $9 data[], $10 sha256[]. */
  putWrites: string;
  /** $1 thread: every row of the thread in one statement. */
  deleteThread: string;
  /** $1 thread: takes the thread's row lock for a prune (no row: nothing to prune). */
  lockThreadForPrune: string;
  /** $1 thread, $2 keep: drops checkpoints past the newest $2 of each namespace, and their writes. */
  pruneCheckpoints: string;
  /** $1 thread: drops blobs no remaining checkpoint of the thread references. */
  collectBlobs: string;
  /** $1 updated before (or null), $2 limit. */
  listThreads: string;
}

export function pgLangGraphStatements(t: LangGraphTables): PgLangGraphStatements {
  return {
    lockThread: `WITH t AS (
  INSERT INTO ${t.threads} (thread_id, created_at, updated_at) VALUES ($1::text, now(), now())
  ON CONFLICT (thread_id) DO UPDATE SET updated_at = now()
  RETURNING thread_id
)
SELECT (SELECT count(*) FROM t)::int AS locked,
  (SELECT channels FROM ${t.checkpoints} WHERE thread_id = $1::text AND checkpoint_ns = $2::text AND checkpoint_id = $3::text) AS parent_channels`,
    insertCheckpoint: `WITH b AS (
  INSERT INTO ${t.blobs} (thread_id, address, type, data, created_at)
  SELECT $1::text, u.address, u.type, u.data, now() FROM unnest($11::text[], $12::text[], $13::bytea[]) AS u(address, type, data)
  ON CONFLICT (thread_id, address) DO NOTHING
)
INSERT INTO ${t.checkpoints} (${CHECKPOINT_LIST}, created_at)
SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::bytea, $7::text, $8::bytea, $9::text, $10::text, now()
WHERE (SELECT count(*) FROM ${t.blobs} WHERE thread_id = $1::text AND address = ANY($14::text[])) = cardinality($14::text[])
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
  parent_checkpoint_id = excluded.parent_checkpoint_id, checkpoint_type = excluded.checkpoint_type, checkpoint = excluded.checkpoint,
  metadata_type = excluded.metadata_type, metadata = excluded.metadata, channels = excluded.channels, sha256 = excluded.sha256,
  created_at = excluded.created_at
RETURNING 1 AS written`,
    getCheckpoint: `SELECT ${CHECKPOINT_LIST} FROM ${t.checkpoints} WHERE thread_id = $1::text AND checkpoint_ns = $2::text AND checkpoint_id = $3::text`,
    getLatest: `SELECT ${CHECKPOINT_LIST} FROM ${t.checkpoints} WHERE thread_id = $1::text AND checkpoint_ns = $2::text ORDER BY checkpoint_id DESC LIMIT 1`,
    getBlobs: `SELECT address, type, data FROM ${t.blobs} WHERE thread_id = $1::text AND address = ANY($2::text[])`,
    getWrites: `SELECT ${WRITE_COLUMNS.join(', ')} FROM ${t.writes}
WHERE thread_id = $1::text AND (checkpoint_ns, checkpoint_id) IN (SELECT k.ns, k.id FROM unnest($2::text[], $3::text[]) AS k(ns, id))`,
    putWrites: `INSERT INTO ${t.writes} (${WRITE_COLUMNS.join(', ')})
SELECT $1::text, $2::text, $3::text, $4::text, u.idx, u.channel, u.type, u.data, $5::text, u.sha256
FROM unnest($6::int[], $7::text[], $8::text[], $9::bytea[], $10::text[]) AS u(idx, channel, type, data, sha256)
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
  channel = excluded.channel, type = excluded.type, data = excluded.data, task_path = excluded.task_path, sha256 = excluded.sha256
WHERE excluded.idx < 0`,
    deleteThread: `WITH w AS (DELETE FROM ${t.writes} WHERE thread_id = $1::text),
b AS (DELETE FROM ${t.blobs} WHERE thread_id = $1::text),
c AS (DELETE FROM ${t.checkpoints} WHERE thread_id = $1::text)
DELETE FROM ${t.threads} WHERE thread_id = $1::text`,
    lockThreadForPrune: `SELECT thread_id FROM ${t.threads} WHERE thread_id = $1::text FOR UPDATE`,
    pruneCheckpoints: `WITH ranked AS (
  SELECT checkpoint_ns, checkpoint_id, row_number() OVER (PARTITION BY checkpoint_ns ORDER BY checkpoint_id DESC) AS rn
  FROM ${t.checkpoints} WHERE thread_id = $1::text
), gone AS (
  DELETE FROM ${t.checkpoints} c USING ranked r
  WHERE c.thread_id = $1::text AND c.checkpoint_ns = r.checkpoint_ns AND c.checkpoint_id = r.checkpoint_id AND r.rn > $2::int
  RETURNING c.checkpoint_ns, c.checkpoint_id
), w AS (
  DELETE FROM ${t.writes} x USING gone g
  WHERE x.thread_id = $1::text AND x.checkpoint_ns = g.checkpoint_ns AND x.checkpoint_id = g.checkpoint_id
  RETURNING 1
)
SELECT (SELECT count(*) FROM gone)::int AS checkpoints, (SELECT count(*) FROM w)::int AS writes`,
    collectBlobs: `DELETE FROM ${t.blobs} b WHERE b.thread_id = $1::text AND b.address NOT IN (
  SELECT e.value->>1 FROM ${t.checkpoints} c CROSS JOIN LATERAL jsonb_each(c.channels::jsonb) e WHERE c.thread_id = $1::text
)`,
    listThreads: `SELECT thread_id, updated_at FROM ${t.threads} WHERE $1::timestamptz IS NULL OR updated_at < $1::timestamptz ORDER BY updated_at, thread_id LIMIT $2::int`,
  };
}

/**
 * A page of checkpoints, newest first (see {@link CheckpointQuery}); only the conditions in use are in
 * the text, so each combination is its own prepared statement.
 *
 * @example
 * pgListCheckpoints(tables, { threadId: 't', limit: 10 }).text // '... WHERE thread_id = $1::text ORDER BY ... LIMIT $2::int'
 */
export function pgListCheckpoints(t: LangGraphTables, q: CheckpointQuery): BuiltQuery {
  const values: unknown[] = [];
  const where: string[] = [];
  const param = (value: unknown, type: string) => {
    values.push(value);
    return `$${values.length}::${type}`;
  };
  if (q.threadId !== undefined) where.push(`thread_id = ${param(q.threadId, 'text')}`);
  if (q.checkpointNs !== undefined) where.push(`checkpoint_ns = ${param(q.checkpointNs, 'text')}`);
  if (q.checkpointId !== undefined) where.push(`checkpoint_id = ${param(q.checkpointId, 'text')}`);
  if (q.beforeId !== undefined) where.push(`checkpoint_id < ${param(q.beforeId, 'text')}`);
  if (q.after !== undefined) {
    const a = q.after;
    where.push(`(checkpoint_id, thread_id, checkpoint_ns) < (${param(a.checkpointId, 'text')}, ${param(a.threadId, 'text')}, ${param(a.checkpointNs, 'text')})`);
  }
  const limit = param(q.limit, 'int');
  const text =
    `SELECT ${CHECKPOINT_LIST} FROM ${t.checkpoints}` +
    (where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '') +
    ` ORDER BY checkpoint_id DESC, thread_id DESC, checkpoint_ns DESC LIMIT ${limit}`;
  return { text, values };
}
