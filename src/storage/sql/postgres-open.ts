import type { Pool } from 'pg';
import type { DataSource } from 'typeorm';
import { typeorm } from '../drivers';
import { buildMigrations } from './migrations';
import type { ResolvedPostgresOptions } from './options';
import { type PgServerFacts, PostgresDataSource } from './postgres-data-source';
import { PostgresOps } from './postgres-ops';
import { type Tables, tableNames } from './sql';
import { pgCreateSchema, pgLockMigrations, pgMigrationsTable, pgRecordedMigrations, pgSchemaState, pgUnlockMigrations } from './sql-postgres-schema';

/**
 * Opens the store's `pg` Pool with the raw driver and reads the migrations table. When every migration is
 * recorded (the usual start of a program), that is all: TypeORM is not loaded (about 300 modules, most of
 * a fresh process's first step). TypeORM is loaded only to migrate (a new database or schema, or one an
 * earlier release wrote), when the store has `entities` of yours, or later, on first use of
 * `store.dataSource` or a transactional side effect. Migrations run under a PostgreSQL advisory lock held
 * by the connection that runs them (so it works with a pool of one), released when that session ends,
 * even if the process dies mid-migration; the executor reads the table again under the lock, so a second
 * process starting at the same time finds them recorded.
 *
 * @example
 * const ops = await openPostgres(resolveOptions({ type: 'postgres', url, schema: 'waypoint' }) as ResolvedPostgresOptions);
 */
export async function openPostgres(options: ResolvedPostgresOptions): Promise<PostgresOps> {
  const tables = tableNames({ schema: options.schema, prefix: options.tablePrefix });
  const source = new PostgresDataSource(options, tables);
  try {
    if (!(await schemaIsCurrent(source, tables))) await migrate(await source.initialize(), options.schema);
    else if (options.entities) await source.initialize();
    return new PostgresOps(source, tables, options.groupCommit, options.poolSize);
  } catch (err) {
    await source.close().catch(() => undefined);
    throw err;
  }
}

/**
 * True when the migrations table records every migration this release has: one statement for the table
 * (and the server facts TypeORM would ask for, kept on `source`), one for the names, on the raw pool. A
 * database with migrations this release does not know (a newer release wrote it) also counts as current;
 * the migrations are additive, as TypeORM's executor would find nothing to run.
 */
export async function schemaIsCurrent(source: PostgresDataSource, tables: Tables): Promise<boolean> {
  const pool: Pool = source.pool;
  const state = (await pool.query<{ found: boolean; version: string; database: string; search_schema: string }>(pgSchemaState(), [pgMigrationsTable(tables)])).rows[0];
  source.remember(serverFacts(state));
  if (!state.found) return false;
  const recorded = new Set((await pool.query<{ name: string }>(pgRecordedMigrations(tables))).rows.map((row) => row.name));
  return migrationNames(tables).every((name) => recorded.has(name));
}

/** The names this release's PostgreSQL migrations record (`WaypointInitialSchema1735689600000`, ...). */
export function migrationNames(tables: Tables): string[] {
  return buildMigrations('postgres', tables).map((Migration) => new Migration().name ?? Migration.name);
}

/** As TypeORM's driver keeps them: the version as its `getVersion()` parses `version()` (`16.4`). */
function serverFacts(state: { version: string; database: string; search_schema: string }): PgServerFacts {
  return { version: state.version.replace(/^PostgreSQL ([\d.]+).*$/, '$1'), database: state.database, searchSchema: state.search_schema };
}

async function migrate(dataSource: DataSource, schema: string | undefined): Promise<void> {
  const queryRunner = dataSource.createQueryRunner('master');
  await queryRunner.connect();
  try {
    await queryRunner.query(pgLockMigrations());
    try {
      // Under the lock: two concurrent CREATE SCHEMA IF NOT EXISTS can still collide on the catalog.
      if (schema) await queryRunner.query(pgCreateSchema(schema));
      const executor = new (typeorm().MigrationExecutor)(dataSource, queryRunner);
      executor.transaction = 'all';
      await executor.executePendingMigrations();
    } finally {
      await queryRunner.query(pgUnlockMigrations());
    }
  } finally {
    await queryRunner.release();
  }
}
