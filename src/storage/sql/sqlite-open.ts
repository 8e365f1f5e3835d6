import { mkdirSync } from 'node:fs';
import * as path from 'node:path';
import type { DataSource } from 'typeorm';
import { betterSqlite3, typeorm } from '../drivers';
import { buildMigrations } from './migrations';
import type { ResolvedSqliteOptions } from './options';
import { type Tables, tableNames } from './sql';
import { sqlitePragmas } from './sql-sqlite';
import { SqliteDataSource } from './sqlite-data-source';
import { type Database, beginImmediate } from './sqlite-driver';
import { SqliteFileIdentity } from './sqlite-file-identity';
import { SqliteOps } from './sqlite-ops';

/** How long init waits for another process's migration before giving up. */
const MIGRATION_LOCK_WAIT_MS = 60_000;

type DatabaseConstructor = new (file: string, options: { timeout: number }) => Database & { close(): void; readonly open: boolean };

/**
 * Opens the database file with better-sqlite3 itself, sets WAL and the durability pragmas, and reads the
 * migrations table. When every migration is recorded (the usual start of a program), that is all: TypeORM
 * is not loaded (about 300 modules, most of a fresh process's first step). TypeORM is loaded only to
 * migrate (a new file, or one written by an earlier release), when the store has `entities` of yours, or
 * later, on first use of `store.dataSource` or a transactional side effect. Migrations run inside
 * `BEGIN IMMEDIATE`, which holds SQLite's single write lock: a second process (or store) starting at the
 * same time waits, then finds them recorded.
 *
 * @example
 * const ops = await openSqlite(resolveOptions({ type: 'sqlite', path: '.waypoint/waypoint.db' }) as ResolvedSqliteOptions);
 */
export async function openSqlite(options: ResolvedSqliteOptions): Promise<SqliteOps> {
  mkdirSync(path.dirname(options.path), { recursive: true });
  const tables = tableNames({ prefix: options.tablePrefix });
  const Database = betterSqlite3() as DatabaseConstructor;
  const db = new Database(options.path, { timeout: options.busyTimeoutMs });
  const dataSource = new SqliteDataSource(db, options, tables);
  try {
    for (const pragma of sqlitePragmas(options)) db.pragma(pragma);
    // What TypeORM's driver sets on every connection it opens; kept so both ways of opening agree.
    db.pragma('foreign_keys = ON');
    // Taken right after the open, so a file deleted or replaced from here on is noticed.
    const identity = SqliteFileIdentity.take(options.path);
    if (!schemaIsCurrent(db, tables)) await migrate(await dataSource.initialize(), db, options.busyTimeoutMs);
    else if (options.entities) await dataSource.initialize();
    identity.checkAll();
    return new SqliteOps(dataSource, db, tables, options.busyTimeoutMs, identity);
  } catch (err) {
    await dataSource.close().catch(() => undefined);
    throw err;
  }
}

/**
 * True when the migrations table records every migration this release has: read with two statements on
 * the raw handle. A database with migrations this release does not know (a newer release wrote it) also
 * counts as current here; the migrations are additive, as TypeORM's executor would find nothing to run.
 */
export function schemaIsCurrent(db: Database, tables: Tables): boolean {
  const table = db.prepare(`SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = @name`).get({ name: tables.migrations });
  if (!table) return false;
  const recorded = new Set(
    db
      .prepare(`SELECT name FROM "${tables.migrations}"`)
      .all()
      .map((row) => row.name),
  );
  return migrationNames(tables).every((name) => recorded.has(name));
}

/** The names this release's migrations record (`WaypointInitialSchema1735689600000`, ...). */
export function migrationNames(tables: Tables): string[] {
  return buildMigrations('sqlite', tables).map((Migration) => new Migration().name ?? Migration.name);
}

async function migrate(dataSource: DataSource, db: Database, busyTimeoutMs: number): Promise<void> {
  await beginImmediate(db, busyTimeoutMs, Math.max(MIGRATION_LOCK_WAIT_MS, busyTimeoutMs));
  try {
    const executor = new (typeorm().MigrationExecutor)(dataSource, dataSource.createQueryRunner());
    executor.transaction = 'none'; // the surrounding BEGIN IMMEDIATE is the transaction
    await executor.executePendingMigrations();
    db.exec('COMMIT');
  } catch (err) {
    if (db.inTransaction) db.exec('ROLLBACK');
    throw err;
  }
}
