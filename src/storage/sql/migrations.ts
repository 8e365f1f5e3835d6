import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { Dialect, Tables } from './sql';
import { pgControlFlowV4, pgControlFlowV4Down, pgHotRunsV3, pgHotRunsV3Down, pgSchemaV1, pgSchemaV1Down, pgStepCursorV5, pgStepCursorV5Down } from './sql-postgres-schema';
import { pgStreamV6, pgStreamV6Down, pgStreamV7, pgStreamV7Down, sqliteStreamV6, sqliteStreamV6Down, sqliteStreamV7, sqliteStreamV7Down } from './sql-stream';
import { sqliteControlFlowV4, sqliteControlFlowV4Down, sqliteSchemaV1, sqliteSchemaV1Down, sqliteStepCursorV5, sqliteStepCursorV5Down } from './sql-sqlite';

/**
 * The versioned schema migrations of the SQL store, applied in order by TypeORM's MigrationExecutor and
 * recorded in `<prefix>migrations`. Never `synchronize`: the schema of a database holding checkpoints
 * changes only through a reviewed, recorded migration.
 *
 * Table names depend on the store's options (schema, prefix), so each migration is a class built per
 * store that closes over them. The `name` (with TypeORM's trailing 13-digit timestamp) is what gets
 * recorded: never rename a shipped migration; add a new one (V2, ...) at the end of the list.
 *
 * @example
 * new DataSource({ ..., migrations: buildMigrations('postgres', tables), migrationsTableName: tables.migrations });
 */
export function buildMigrations(dialect: Dialect, tables: Tables): Array<new () => MigrationInterface> {
  const pg = dialect === 'postgres';
  return [
    migrationClass('WaypointInitialSchema', 'WaypointInitialSchema1735689600000', {
      up: pg ? pgSchemaV1(tables) : sqliteSchemaV1(tables),
      down: pg ? pgSchemaV1Down(tables) : sqliteSchemaV1Down(tables),
    }),
    // V2 (WaypointLangGraphSchema1767225600000) created the LangGraph saver's tables; the saver now creates
    // them itself on first use (src/integrations/langgraph/sql-setup.ts) and records that same name, so a
    // database where V2 ran keeps its tables and its record. Never reuse the name.

    // V3: HOT run-row updates on PostgreSQL (see pgHotRunsV3). SQLite has no such thing: recorded, no DDL.
    migrationClass('WaypointHotRunUpdates', 'WaypointHotRunUpdates1767312000000', {
      up: pg ? pgHotRunsV3(tables) : [],
      down: pg ? pgHotRunsV3Down(tables) : [],
    }),
    // V4: control flow (issue 20): a step row's path, a run's parent (see pgControlFlowV4).
    migrationClass('WaypointControlFlow', 'WaypointControlFlow1767398400000', {
      up: pg ? pgControlFlowV4(tables) : sqliteControlFlowV4(tables),
      down: pg ? pgControlFlowV4Down(tables) : sqliteControlFlowV4Down(tables),
    }),
    // V5: no per-step run-row rewrite (issue 22): the cursor after each step lives on its step row.
    migrationClass('WaypointStepCursor', 'WaypointStepCursor1767484800000', {
      up: pg ? pgStepCursorV5(tables) : sqliteStepCursorV5(tables),
      down: pg ? pgStepCursorV5Down(tables) : sqliteStepCursorV5Down(tables),
    }),
    // V6: run output streams (issue 37): the events table and the run row's stream counter. Additive:
    // rows written before read as runs with an empty stream.
    migrationClass('WaypointRunStreams', 'WaypointRunStreams1767571200000', {
      up: pg ? pgStreamV6(tables) : sqliteStreamV6(tables),
      down: pg ? pgStreamV6Down(tables) : sqliteStreamV6Down(tables),
    }),
    // V7: one stream row per append, not per event (issue 37's bytes target): the batches table. Additive:
    // V6's event rows stay and read back with the batches.
    migrationClass('WaypointStreamBatches', 'WaypointStreamBatches1767657600000', {
      up: pg ? pgStreamV7(tables) : sqliteStreamV7(tables),
      down: pg ? pgStreamV7Down(tables) : sqliteStreamV7Down(tables),
    }),
  ];
}

/**
 * One migration as a class TypeORM can instantiate: `name` (ending in TypeORM's 13-digit timestamp) is what
 * the migrations table records; `className` is the class's own name, kept as the hand-written classes had it
 * so that logs and stack traces read as before. The statements run one at a time, in order (better-sqlite3
 * prepares one statement at a time).
 *
 * @example
 * migrationClass('WaypointStepCursor', 'WaypointStepCursor1767484800000', { up: ['ALTER TABLE ...'], down: [] })
 */
export function migrationClass(className: string, name: string, statements: { up: readonly string[]; down: readonly string[] }): new () => MigrationInterface {
  const migration = class implements MigrationInterface {
    name = name;
    async up(queryRunner: QueryRunner): Promise<void> {
      for (const statement of statements.up) await queryRunner.query(statement);
    }
    async down(queryRunner: QueryRunner): Promise<void> {
      for (const statement of statements.down) await queryRunner.query(statement);
    }
  };
  Object.defineProperty(migration, 'name', { value: className });
  return migration;
}
