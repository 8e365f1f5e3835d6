import { type Tables, OPERATION_STATES, RUN_STATUSES, STEP_STATUSES, quoteIdent, sqlStringList } from './sql';

/**
 * PostgreSQL schema SQL: the versioned migrations' DDL and the advisory lock taken around them. The
 * statements the store runs against that schema are in sql-postgres.ts.
 */

/** Advisory lock key taken around migrations: the ASCII bytes of "waypoint" as a bigint. */
export const PG_MIGRATION_LOCK_KEY = '8602290287066836596';

export function pgCreateSchema(schema: string): string {
  return `CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`;
}

export function pgLockMigrations(): string {
  return `SELECT pg_advisory_lock(${PG_MIGRATION_LOCK_KEY})`;
}

export function pgUnlockMigrations(): string {
  return `SELECT pg_advisory_unlock(${PG_MIGRATION_LOCK_KEY})`;
}

/**
 * What a store reads when it opens, before any lock: whether the migrations table exists (`$1`, its
 * qualified name; unqualified resolves through search_path, as TypeORM's executor names it), and what
 * TypeORM's driver would ask the server when it connects (version, database, current schema).
 */
export function pgSchemaState(): string {
  return 'SELECT to_regclass($1) IS NOT NULL AS found, version() AS version, current_database() AS database, current_schema() AS search_schema';
}

/** The migration names recorded in the migrations table. */
export function pgRecordedMigrations(t: Tables): string {
  return `SELECT name FROM ${pgMigrationsTable(t)}`;
}

/** The migrations table's name as TypeORM's executor writes it: qualified when the store has a schema. */
export function pgMigrationsTable(t: Tables): string {
  return t.schema ? `${t.schema}.${quoteIdent(t.migrations)}` : quoteIdent(t.migrations);
}

/** Version 1 of the schema, one statement per element. No foreign keys: they would cost a lookup per append. */
export function pgSchemaV1(t: Tables): string[] {
  return [
    `CREATE TABLE ${t.runs} (
  run_id text PRIMARY KEY,
  pipeline_name text NOT NULL,
  pipeline_version text NOT NULL,
  status text NOT NULL CHECK (status IN (${sqlStringList(RUN_STATUSES)})),
  cursor_agent integer NOT NULL DEFAULT 0,
  cursor_step integer NOT NULL DEFAULT 0,
  last_sequence integer NOT NULL DEFAULT 0,
  input text NOT NULL,
  metadata text NOT NULL,
  lease_owner text,
  lease_epoch integer NOT NULL DEFAULT 0,
  lease_expires_at timestamptz(3),
  error text,
  resume_hint text,
  created_at timestamptz(3) NOT NULL,
  updated_at timestamptz(3) NOT NULL
)`,
    `CREATE INDEX ${quoteIdent(`${t.raw.runs}_status_updated_idx`)} ON ${t.runs} (status, updated_at)`,
    `CREATE INDEX ${quoteIdent(`${t.raw.runs}_pipeline_idx`)} ON ${t.runs} (pipeline_name)`,
    `CREATE TABLE ${t.steps} (
  run_id text NOT NULL,
  sequence integer NOT NULL,
  checkpoint_id text NOT NULL,
  agent_index integer NOT NULL,
  agent_id text NOT NULL,
  step_index integer NOT NULL,
  step_name text NOT NULL,
  status text NOT NULL CHECK (status IN (${sqlStringList(STEP_STATUSES)})),
  output text NOT NULL,
  memory text,
  idempotency_key text NOT NULL,
  side_effects_committed boolean NOT NULL,
  started_at timestamptz(3) NOT NULL,
  completed_at timestamptz(3) NOT NULL,
  attempt integer NOT NULL,
  sha256 text NOT NULL,
  PRIMARY KEY (run_id, sequence)
)`,
    `CREATE TABLE ${t.operations} (
  operation_key text PRIMARY KEY,
  run_id text NOT NULL,
  step_key text NOT NULL,
  name text NOT NULL,
  state text NOT NULL CHECK (state IN (${sqlStringList(OPERATION_STATES)})),
  result text,
  error text,
  attempts integer NOT NULL,
  created_at timestamptz(3) NOT NULL,
  updated_at timestamptz(3) NOT NULL
)`,
    `CREATE INDEX ${quoteIdent(`${t.raw.operations}_run_idx`)} ON ${t.operations} (run_id)`,
  ];
}

export function pgSchemaV1Down(t: Tables): string[] {
  return [`DROP TABLE ${t.operations}`, `DROP TABLE ${t.steps}`, `DROP TABLE ${t.runs}`];
}

/**
 * V3: make the per-step run-row UPDATE a HOT update (no index entry written). The columns it changes
 * (last_sequence, cursor, updated_at) must be in no index, so the status index drops updated_at (runs
 * are sorted after the status filter), and the table keeps free space on each page for the new row
 * version (fillfactor 50).
 */
export function pgHotRunsV3(t: Tables): string[] {
  const index = (name: string) => (t.schema ? `${t.schema}.${quoteIdent(name)}` : quoteIdent(name));
  return [
    `DROP INDEX IF EXISTS ${index(`${t.raw.runs}_status_updated_idx`)}`,
    `CREATE INDEX IF NOT EXISTS ${quoteIdent(`${t.raw.runs}_status_idx`)} ON ${t.runs} (status)`,
    `ALTER TABLE ${t.runs} SET (fillfactor = 50)`,
  ];
}

export function pgHotRunsV3Down(t: Tables): string[] {
  const index = (name: string) => (t.schema ? `${t.schema}.${quoteIdent(name)}` : quoteIdent(name));
  return [
    `ALTER TABLE ${t.runs} RESET (fillfactor)`,
    `DROP INDEX IF EXISTS ${index(`${t.raw.runs}_status_idx`)}`,
    `CREATE INDEX ${quoteIdent(`${t.raw.runs}_status_updated_idx`)} ON ${t.runs} (status, updated_at)`,
  ];
}

/**
 * V4: control flow. A step row's `path` and a run's `parent_run_id` (indexed: `listRuns({ parentRunId })`
 * lists a parent's children), both nullable: rows written before read back as null, and PostgreSQL adds
 * a nullable column without a default as a catalog change, rewriting no row. The per-step run-row UPDATE
 * never sets parent_run_id, so the new index keeps it a HOT update (V3).
 */
export function pgControlFlowV4(t: Tables): string[] {
  return [
    `ALTER TABLE ${t.steps} ADD COLUMN IF NOT EXISTS path text`,
    `ALTER TABLE ${t.runs} ADD COLUMN IF NOT EXISTS parent_run_id text`,
    `CREATE INDEX IF NOT EXISTS ${quoteIdent(`${t.raw.runs}_parent_idx`)} ON ${t.runs} (parent_run_id)`,
  ];
}

export function pgControlFlowV4Down(t: Tables): string[] {
  const index = (name: string) => (t.schema ? `${t.schema}.${quoteIdent(name)}` : quoteIdent(name));
  return [
    `DROP INDEX IF EXISTS ${index(`${t.raw.runs}_parent_idx`)}`,
    `ALTER TABLE ${t.runs} DROP COLUMN IF EXISTS parent_run_id`,
    `ALTER TABLE ${t.steps} DROP COLUMN IF EXISTS path`,
  ];
}

/**
 * V5: appends stop rewriting the run row (issue 22). Each step row keeps the run's cursor after it, so the
 * live cursor is read from the last step (`derivedRunColumns` in sql.ts). Nullable, no default: a catalog
 * change that rewrites no row; rows written before read back as null and their run row's cursor is used.
 */
export function pgStepCursorV5(t: Tables): string[] {
  return [`ALTER TABLE ${t.steps} ADD COLUMN IF NOT EXISTS cursor_agent integer, ADD COLUMN IF NOT EXISTS cursor_step integer`];
}

export function pgStepCursorV5Down(t: Tables): string[] {
  return [`ALTER TABLE ${t.steps} DROP COLUMN IF EXISTS cursor_step, DROP COLUMN IF EXISTS cursor_agent`];
}
