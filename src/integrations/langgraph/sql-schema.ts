import { type Dialect, type Tables, quoteIdent } from '../../storage/sql/sql';

/**
 * Table names and DDL of the LangGraph saver's tables, next to a Waypoint SQL store's run tables and with
 * the same schema and prefix. The saver creates them on first use (sql-setup.ts); until this release the
 * store's migration `WaypointLangGraphSchema` created them, with this same DDL. Pure functions.
 */

/** Quoted, qualified names (for SQL text) and raw names (for index names). */
export interface LangGraphTables {
  threads: string;
  checkpoints: string;
  blobs: string;
  writes: string;
  raw: { threads: string; checkpoints: string; blobs: string; writes: string };
}

const MIGRATIONS_SUFFIX = 'migrations';

/**
 * The LangGraph tables living beside a Waypoint store's tables. The store's prefix is read back from its
 * migrations table name (`<prefix>migrations`), so the saver always follows the store's configuration.
 *
 * @example
 * langGraphTables(tableNames({ schema: 'wp', prefix: 'waypoint_' })).checkpoints // '"wp"."waypoint_langgraph_checkpoints"'
 */
export function langGraphTables(tables: Pick<Tables, 'migrations' | 'schema'>): LangGraphTables {
  // plain Error: an internal invariant (the table names are built above), never met by a user.
  if (!tables.migrations.endsWith(MIGRATIONS_SUFFIX)) throw new Error(`unexpected migrations table name '${tables.migrations}'`);
  const prefix = tables.migrations.slice(0, -MIGRATIONS_SUFFIX.length);
  const raw = {
    threads: `${prefix}langgraph_threads`,
    checkpoints: `${prefix}langgraph_checkpoints`,
    blobs: `${prefix}langgraph_blobs`,
    writes: `${prefix}langgraph_writes`,
  };
  const qualify = (name: string) => (tables.schema ? `${tables.schema}.${quoteIdent(name)}` : quoteIdent(name));
  return { threads: qualify(raw.threads), checkpoints: qualify(raw.checkpoints), blobs: qualify(raw.blobs), writes: qualify(raw.writes), raw };
}

/**
 * Version 2 of the SQL schema: the LangGraph tables. Identifier columns use byte order (`COLLATE "C"` on
 * PostgreSQL, SQLite's default BINARY) so "newest first" by checkpoint id means the same on every backend.
 * Channel values live in `blobs` once per thread under their SHA-256; a checkpoint row references them.
 */
export function langGraphSchema(dialect: Dialect, tables: Pick<Tables, 'migrations' | 'schema'>): string[] {
  const t = langGraphTables(tables);
  const pg = dialect === 'postgres';
  const id = pg ? 'text COLLATE "C"' : 'TEXT';
  const text = pg ? 'text' : 'TEXT';
  const bytes = pg ? 'bytea' : 'BLOB';
  const int = pg ? 'integer' : 'INTEGER';
  const time = pg ? 'timestamptz(3)' : 'INTEGER';
  const strict = pg ? '' : ' STRICT';
  return [
    `CREATE TABLE ${t.threads} (
  thread_id ${id} PRIMARY KEY NOT NULL,
  created_at ${time} NOT NULL,
  updated_at ${time} NOT NULL
)${strict}`,
    `CREATE INDEX ${quoteIdent(`${t.raw.threads}_updated_idx`)} ON ${t.threads} (updated_at)`,
    `CREATE TABLE ${t.checkpoints} (
  thread_id ${id} NOT NULL,
  checkpoint_ns ${id} NOT NULL,
  checkpoint_id ${id} NOT NULL,
  parent_checkpoint_id ${id},
  checkpoint_type ${text} NOT NULL,
  checkpoint ${bytes} NOT NULL,
  metadata_type ${text} NOT NULL,
  metadata ${bytes} NOT NULL,
  channels ${text} NOT NULL,
  sha256 ${text} NOT NULL,
  created_at ${time} NOT NULL,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)${strict}`,
    `CREATE TABLE ${t.blobs} (
  thread_id ${id} NOT NULL,
  address ${id} NOT NULL,
  type ${text} NOT NULL,
  data ${bytes} NOT NULL,
  created_at ${time} NOT NULL,
  PRIMARY KEY (thread_id, address)
)${strict}`,
    `CREATE TABLE ${t.writes} (
  thread_id ${id} NOT NULL,
  checkpoint_ns ${id} NOT NULL,
  checkpoint_id ${id} NOT NULL,
  task_id ${id} NOT NULL,
  idx ${int} NOT NULL,
  channel ${text} NOT NULL,
  type ${text} NOT NULL,
  data ${bytes} NOT NULL,
  task_path ${text} NOT NULL,
  sha256 ${text} NOT NULL,
  PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
)${strict}`,
  ];
}
