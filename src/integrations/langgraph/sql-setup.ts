import type { Pool } from 'pg';
import { PG_MIGRATION_LOCK_KEY } from '../../storage/sql/sql-postgres-schema';
import { type Dialect, type Tables, quoteIdent } from '../../storage/sql/sql';
import { type SqliteDatabase, noTransactionOpen } from './sqlite-backend';
import { langGraphSchema } from './sql-schema';

/**
 * The LangGraph saver creates its own tables, on first use, in the database of the Waypoint store it is
 * given: a store that never meets a saver has no LangGraph tables.
 *
 * The creation is recorded in the store's migrations table under the name the SQL store's own V2
 * migration used before the tables moved here (`WaypointLangGraphSchema1767225600000`), so
 * - a database whose tables that migration already created is left as it is (the record is there), and
 * - an older Waypoint opening a database set up here does not try to create the tables a second time.
 *
 * It runs under the store's migration lock (PostgreSQL: the same advisory lock; SQLite: `BEGIN IMMEDIATE`,
 * SQLite's one write lock), so savers and stores starting together on one database create them once.
 */
export const LANGGRAPH_MIGRATION = { name: 'WaypointLangGraphSchema1767225600000', timestamp: 1767225600000 } as const;

/** The store's migrations table, qualified and quoted (TypeORM keeps it in the store's schema). */
function migrationsTable(tables: Pick<Tables, 'migrations' | 'schema'>): string {
  return tables.schema ? `${tables.schema}.${quoteIdent(tables.migrations)}` : quoteIdent(tables.migrations);
}

/** The statements that create the tables and record them, in order. */
function setupStatements(dialect: Dialect, tables: Pick<Tables, 'migrations' | 'schema'>): { ddl: string[]; record: string; recorded: string } {
  const migrations = migrationsTable(tables);
  const placeholders = dialect === 'postgres' ? ['$1', '$2'] : ['?', '?'];
  return {
    ddl: langGraphSchema(dialect, tables),
    recorded: `SELECT 1 AS done FROM ${migrations} WHERE "name" = ${placeholders[0]}`,
    record: `INSERT INTO ${migrations} ("timestamp", "name") VALUES (${placeholders.join(', ')})`,
  };
}

/**
 * PostgreSQL: on one pooled connection, takes the store's migration advisory lock, and unless the tables
 * are recorded, creates and records them in one transaction. The lock is a session lock: it is released
 * below, or by the server when the connection dies.
 */
export async function ensurePostgresTables(pool: Pool, tables: Pick<Tables, 'migrations' | 'schema'>): Promise<void> {
  const sql = setupStatements('postgres', tables);
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(`SELECT pg_advisory_lock(${PG_MIGRATION_LOCK_KEY})`);
    try {
      if ((await client.query(sql.recorded, [LANGGRAPH_MIGRATION.name])).rowCount !== 0) return;
      await client.query('BEGIN');
      try {
        for (const statement of sql.ddl) await client.query(statement);
        await client.query(sql.record, [LANGGRAPH_MIGRATION.timestamp, LANGGRAPH_MIGRATION.name]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
        throw err;
      }
    } finally {
      if (!broken) await client.query(`SELECT pg_advisory_unlock(${PG_MIGRATION_LOCK_KEY})`).catch((unlockError: Error) => (broken = unlockError));
    }
  } finally {
    // A connection that could not roll back or unlock is dropped from the pool (which ends the lock).
    client.release(broken);
  }
}

/**
 * SQLite: once no transaction of the store's is open on the shared connection, one `BEGIN IMMEDIATE`
 * transaction (it waits up to the store's busy timeout for another process) checks the record and, unless
 * it is there, creates and records the tables.
 */
export async function ensureSqliteTables(db: SqliteDatabase, tables: Pick<Tables, 'migrations' | 'schema'>): Promise<void> {
  const sql = setupStatements('sqlite', tables);
  await noTransactionOpen(db);
  db.transaction(() => {
    if (db.prepare(sql.recorded).get([LANGGRAPH_MIGRATION.name]) !== undefined) return;
    for (const statement of sql.ddl) db.prepare(statement).run();
    db.prepare(sql.record).run([LANGGRAPH_MIGRATION.timestamp, LANGGRAPH_MIGRATION.name]);
  }).immediate();
}
