import { createHash } from 'node:crypto';
import { RUN_STATUSES, type Tables, quoteIdent, sqlStringList } from './sql';
import { STREAM_EVENT_KINDS } from '../stream-rows';

/*
 * The SQL of the runs' output streams (issue 37), both dialects: the V6 and V7 migrations and the
 * statements. V6: one table of events, one row per event keyed (run_id, "offset"), one nullable column
 * per property of any kind (see stream-rows.ts). V7: one row per append instead (a batch: its first
 * offset, its count and a body, stream-rows.ts `encodeStreamBatch`), where every append now goes; V6
 * rows are still read (a read is a UNION of both), so streams written before stay readable. The next offset of a run is a counter on its run row (`stream_length`), moved by the
 * same statement (PostgreSQL) or transaction (SQLite) that inserts the events. Its UPDATE takes the run
 * row's lock, so two appenders of one run (a fenced part batch and an unfenced status event) are
 * serialized on it and never pick the same offsets; the fence is its WHERE clause, so a stale writer
 * updates no row and inserts nothing. Pure builders: unit-tested as strings.
 */

/** Columns of the events table, in the order every SELECT returns them and every INSERT takes them. */
export const EVENT_COLUMNS = ['run_id', '"offset"', 'kind', 'step', 'attempt', 'data', 'status', 'detail', 'created_at'] as const;

/** V6 on PostgreSQL: the events table and the run row's counter (a constant default: a catalog change, no row rewritten). */
export function pgStreamV6(t: Tables): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${t.events} (
  run_id text NOT NULL,
  "offset" integer NOT NULL,
  kind text NOT NULL CHECK (kind IN (${sqlStringList(STREAM_EVENT_KINDS)})),
  step text,
  attempt integer,
  data text,
  status text CHECK (status IN (${sqlStringList(RUN_STATUSES)})),
  detail text,
  created_at timestamptz(3) NOT NULL,
  PRIMARY KEY (run_id, "offset")
)`,
    `ALTER TABLE ${t.runs} ADD COLUMN IF NOT EXISTS stream_length integer NOT NULL DEFAULT 0`,
  ];
}

export function pgStreamV6Down(t: Tables): string[] {
  return [`ALTER TABLE ${t.runs} DROP COLUMN IF EXISTS stream_length`, `DROP TABLE IF EXISTS ${t.events}`];
}

/** V6 on SQLite: the same table and counter. */
export function sqliteStreamV6(t: Tables): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${t.events} (
  run_id TEXT NOT NULL,
  "offset" INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN (${sqlStringList(STREAM_EVENT_KINDS)})),
  step TEXT,
  attempt INTEGER,
  data TEXT,
  status TEXT CHECK (status IN (${sqlStringList(RUN_STATUSES)})),
  detail TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, "offset")
) WITHOUT ROWID, STRICT`,
    `ALTER TABLE ${t.runs} ADD COLUMN stream_length INTEGER NOT NULL DEFAULT 0`,
  ];
}

export function sqliteStreamV6Down(t: Tables): string[] {
  return [`ALTER TABLE ${t.runs} DROP COLUMN stream_length`, `DROP TABLE IF EXISTS ${t.events}`];
}

/** Columns of the batches table (V7), in the order every SELECT returns them and every INSERT takes them. */
export const BATCH_COLUMNS = ['run_id', '"offset"', 'count', 'body', 'created_at'] as const;

/**
 * V7 on PostgreSQL: one row per append (issue 37's bytes target): `"offset"` is its first event's offset,
 * `count` how many it holds, `body` the batch (stream-rows.ts `encodeStreamBatch`). Additive: V6's
 * per-event rows stay where they are and read back with the batches (the read is a UNION of both).
 */
export function pgStreamV7(t: Tables): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${t.batches} (
  run_id text NOT NULL,
  "offset" integer NOT NULL,
  count integer NOT NULL CHECK (count > 0),
  body text NOT NULL,
  created_at timestamptz(3) NOT NULL,
  PRIMARY KEY (run_id, "offset")
)`,
  ];
}

export function pgStreamV7Down(t: Tables): string[] {
  return [`DROP TABLE IF EXISTS ${t.batches}`];
}

/** V7 on SQLite: the same table (a rowid table: a batch row is a few kilobytes, too wide for WITHOUT ROWID). */
export function sqliteStreamV7(t: Tables): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${t.batches} (
  run_id TEXT NOT NULL,
  "offset" INTEGER NOT NULL,
  count INTEGER NOT NULL CHECK (count > 0),
  body TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (run_id, "offset")
) STRICT`,
  ];
}

export function sqliteStreamV7Down(t: Tables): string[] {
  return [`DROP TABLE IF EXISTS ${t.batches}`];
}

/**
 * The PostgreSQL channel a store's appends NOTIFY and its waiters LISTEN on: one per events table, so
 * two stores in two schemas of one database do not wake each other. A hash keeps it under the 63-byte
 * identifier limit whatever the schema and prefix.
 *
 * @example
 * pgStreamChannel(tableNames({ schema: 'wp', prefix: 'waypoint_' })) // 'waypoint_stream_' and 16 hex digits
 */
export function pgStreamChannel(t: Tables): string {
  return `waypoint_stream_${createHash('sha1').update(t.events).digest('hex').slice(0, 16)}`;
}

/** The PostgreSQL statements, built once per store. */
export function pgStreamStatements(t: Tables) {
  return {
    /**
     * One statement: moves the run's counter by $4 (fenced by $2 when not null), inserts the batch $5 at
     * the first offset it reserved, and notifies channel $3 with the run id, all in its transaction (the
     * notification is delivered at commit). $1 run_id. No row: the run is unknown or the fence is stale,
     * and nothing was written.
     */
    append: `WITH head AS (
  UPDATE ${t.runs} SET stream_length = stream_length + $4::int
  WHERE run_id = $1::text AND ($2::int IS NULL OR lease_epoch = $2::int)
  RETURNING stream_length - $4::int AS first
), ins AS (
  INSERT INTO ${t.batches} (${BATCH_COLUMNS.join(', ')}) SELECT $1::text, head.first, $4::int, $5::text, now() FROM head
  RETURNING 1
), note AS (
  SELECT pg_notify($3::text, $1::text) FROM head
)
SELECT head.first, (SELECT count(*) FROM ins) AS inserted, (SELECT count(*) FROM note) AS notified FROM head`,
    /**
     * $1 run_id, $2 from, $3 limit: the rows holding offsets from $2 to $2 + $3 - 1, V6 event rows and V7
     * batches (from the one holding $2), by first offset; two bounded primary-key range reads.
     */
    read: `(SELECT "offset", 1 AS count, kind, step, attempt, data, status, detail, NULL::text AS body, created_at FROM ${t.events}
  WHERE run_id = $1::text AND "offset" >= $2::int AND "offset" < $2::int + $3::int)
UNION ALL
(SELECT "offset", count, NULL, NULL, NULL, NULL, NULL, NULL, body, created_at FROM ${t.batches}
  WHERE run_id = $1::text AND "offset" < $2::int + $3::int
  AND "offset" >= COALESCE((SELECT max("offset") FROM ${t.batches} WHERE run_id = $1::text AND "offset" <= $2::int), 0))
ORDER BY 1`,
    /** $1 run_id. No row for an unknown run. */
    length: `SELECT stream_length FROM ${t.runs} WHERE run_id = $1::text`,
    /** $1 run_id: deletes the run's events (rows and batches) and resets its counter in one statement; returns how many events were deleted. */
    drop: `WITH gone AS (DELETE FROM ${t.events} WHERE run_id = $1::text RETURNING 1),
gone_batches AS (DELETE FROM ${t.batches} WHERE run_id = $1::text RETURNING count), reset AS (
  UPDATE ${t.runs} SET stream_length = 0 WHERE run_id = $1::text AND stream_length <> 0 RETURNING 1
)
SELECT (SELECT count(*) FROM gone) + (SELECT COALESCE(sum(count), 0) FROM gone_batches) AS dropped, (SELECT count(*) FROM reset) AS reset`,
    /** $1 channel (an identifier: LISTEN takes no parameter). */
    listen: (channel: string) => `LISTEN ${quoteIdent(channel)}`,
  };
}

/** The SQLite statements (named parameters), built once per store; `append` runs them in one transaction. */
export function sqliteStreamStatements(t: Tables) {
  return {
    /** Reserves `@count` offsets: no row when the run is unknown or the fence (@epoch, when not null) is stale. */
    reserve: `UPDATE ${t.runs} SET stream_length = stream_length + @count
WHERE run_id = @run_id AND (@epoch IS NULL OR lease_epoch = @epoch)
RETURNING stream_length - @count AS first`,
    insert: `INSERT INTO ${t.batches} (${BATCH_COLUMNS.join(', ')}) VALUES (@run_id, @offset, @count, @body, @created_at)`,
    /** The rows holding offsets @from to @from + @limit - 1: V6 event rows and V7 batches, as the PostgreSQL read. */
    read: `SELECT "offset", 1 AS count, kind, step, attempt, data, status, detail, NULL AS body, created_at FROM ${t.events}
  WHERE run_id = @run_id AND "offset" >= @from AND "offset" < @from + @limit
UNION ALL
SELECT "offset", count, NULL, NULL, NULL, NULL, NULL, NULL, body, created_at FROM ${t.batches}
  WHERE run_id = @run_id AND "offset" < @from + @limit
  AND "offset" >= COALESCE((SELECT max("offset") FROM ${t.batches} WHERE run_id = @run_id AND "offset" <= @from), 0)
ORDER BY 1`,
    length: `SELECT stream_length FROM ${t.runs} WHERE run_id = @run_id`,
    deleteEvents: `DELETE FROM ${t.events} WHERE run_id = @run_id`,
    /** Deletes the run's batches; returns their event counts (RETURNING: the dropped total is their sum). */
    deleteBatches: `DELETE FROM ${t.batches} WHERE run_id = @run_id RETURNING count`,
    resetLength: `UPDATE ${t.runs} SET stream_length = 0 WHERE run_id = @run_id`,
  };
}

export type SqliteStreamStatementName = keyof ReturnType<typeof sqliteStreamStatements>;
