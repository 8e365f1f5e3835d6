import type { DataSource } from 'typeorm';
import { typeorm } from '../drivers';
import { buildMigrations } from './migrations';
import type { ResolvedPostgresOptions } from './options';
import { PostgresOps } from './postgres-ops';
import { tableNames } from './sql';
import { pgCreateSchema, pgLockMigrations, pgUnlockMigrations } from './sql-postgres-schema';

/**
 * Connects through TypeORM, applies pending migrations under a PostgreSQL advisory lock, and returns the
 * PostgreSQL operations. The lock is held by the same connection that runs the migrations (so it works
 * with a pool of one) and is released when that session ends, even if the process dies mid-migration.
 */
export async function openPostgres(options: ResolvedPostgresOptions): Promise<PostgresOps> {
  const tables = tableNames({ schema: options.schema, prefix: options.tablePrefix });
  const dataSource = new (typeorm().DataSource)({
    type: 'postgres',
    url: options.url,
    schema: options.schema,
    poolSize: options.poolSize,
    applicationName: 'waypoint',
    installExtensions: false,
    entities: options.entities, // metadata for transactional side effects; never synchronized
    synchronize: false,
    migrationsRun: false,
    logging: false,
    migrations: buildMigrations('postgres', tables),
    migrationsTableName: tables.migrations,
    migrationsTransactionMode: 'all',
  });
  await dataSource.initialize();
  try {
    await migrate(dataSource, options.schema);
  } catch (err) {
    await dataSource.destroy().catch(() => undefined);
    throw err;
  }
  return new PostgresOps(dataSource, tables, options.groupCommit, options.poolSize);
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
