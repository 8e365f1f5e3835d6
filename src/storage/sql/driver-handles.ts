import type { Pool } from 'pg';
import type { DataSource } from 'typeorm';

/*
 * The client handles under a TypeORM DataSource that the stores (and the LangGraph saver, on the same
 * database) run their SQL on. Both are public members of TypeORM's drivers, typed `any` there
 * (`PostgresDriver.master`: the pg Pool; `AbstractSqliteDriver.databaseConnection`: the better-sqlite3
 * handle); `DataSource.driver` is typed as the generic `Driver`, so they are reached here, once.
 */

/** The pg Pool TypeORM's PostgreSQL driver created for `dataSource` (initialized, type 'postgres'). */
export function pgPoolOf(dataSource: DataSource): Pool {
  return (dataSource.driver as unknown as { master: Pool }).master;
}

/** The better-sqlite3 handle of TypeORM's SQLite driver for `dataSource` (initialized, type 'better-sqlite3'). */
export function sqliteHandleOf<D>(dataSource: DataSource): D {
  return (dataSource.driver as unknown as { databaseConnection: D }).databaseConnection;
}
