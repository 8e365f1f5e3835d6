import type { MigrationInterface } from 'typeorm';
import { langGraphSchema } from '../../src/integrations/langgraph/sql-schema';
import { buildMigrations, migrationClass } from '../../src/storage/sql/migrations';
import type { Dialect, Tables } from '../../src/storage/sql/sql';

/** The migrations the release before control flow (V4) recorded, in order: V1, V2 (LangGraph tables), V3. */
export const PREVIOUS_RELEASE = ['WaypointInitialSchema1735689600000', 'WaypointLangGraphSchema1767225600000', 'WaypointHotRunUpdates1767312000000'];

/**
 * The SQL store's migration list as that release shipped it: this release's V1 and V3 (unchanged), and
 * between them V2, which created the LangGraph tables from the store (the saver creates them itself now).
 * For a DataSource that sets up a database the way the previous release left it.
 *
 * @example
 * new DataSource({ type: 'better-sqlite3', database: file, migrations: previousReleaseMigrations('sqlite', tables), migrationsTableName: tables.migrations })
 */
export function previousReleaseMigrations(dialect: Dialect, tables: Tables): Array<new () => MigrationInterface> {
  const current = buildMigrations(dialect, tables);
  const named = (name: string) => {
    const found = current.find((m) => new m().name === name);
    if (!found) throw new Error(`migration ${name} is no longer in buildMigrations()`);
    return found;
  };
  const langGraphV2 = migrationClass('WaypointLangGraphSchema', PREVIOUS_RELEASE[1], { up: langGraphSchema(dialect, tables), down: [] });
  return [named(PREVIOUS_RELEASE[0]), langGraphV2, named(PREVIOUS_RELEASE[2])];
}

/**
 * The migrations the release before the step cursor (V5) recorded: the previous release's (with the old
 * LangGraph V2), then V4 (control flow).
 */
export function releaseV4Migrations(dialect: Dialect, tables: Tables): Array<new () => MigrationInterface> {
  const v4 = buildMigrations(dialect, tables).find((m) => new m().name === 'WaypointControlFlow1767398400000');
  if (!v4) throw new Error('migration WaypointControlFlow1767398400000 is no longer in buildMigrations()');
  return [...previousReleaseMigrations(dialect, tables), v4];
}

/** The migrations the release before run streams (V6) recorded: V4's list, then V5 (step cursor). */
export function releaseV5Migrations(dialect: Dialect, tables: Tables): Array<new () => MigrationInterface> {
  const v5 = buildMigrations(dialect, tables).find((m) => new m().name === 'WaypointStepCursor1767484800000');
  if (!v5) throw new Error('migration WaypointStepCursor1767484800000 is no longer in buildMigrations()');
  return [...releaseV4Migrations(dialect, tables), v5];
}

/** The migrations the release before stream batches (V7) recorded: V5's list, then V6 (run streams, one row per event). */
export function releaseV6Migrations(dialect: Dialect, tables: Tables): Array<new () => MigrationInterface> {
  const v6 = buildMigrations(dialect, tables).find((m) => new m().name === 'WaypointRunStreams1767571200000');
  if (!v6) throw new Error('migration WaypointRunStreams1767571200000 is no longer in buildMigrations()');
  return [...releaseV5Migrations(dialect, tables), v6];
}
