import type { MigrationInterface, QueryRunner } from 'typeorm';
import type { Dialect, Tables } from './sql';
import { pgControlFlowV4, pgControlFlowV4Down, pgHotRunsV3, pgHotRunsV3Down, pgSchemaV1, pgSchemaV1Down, pgStepCursorV5, pgStepCursorV5Down } from './sql-postgres-schema';
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
  const up = dialect === 'postgres' ? pgSchemaV1(tables) : sqliteSchemaV1(tables);
  const down = dialect === 'postgres' ? pgSchemaV1Down(tables) : sqliteSchemaV1Down(tables);

  class WaypointInitialSchema implements MigrationInterface {
    name = 'WaypointInitialSchema1735689600000';
    // better-sqlite3 prepares one statement at a time, so the DDL is sent statement by statement.
    async up(queryRunner: QueryRunner): Promise<void> {
      for (const statement of up) await queryRunner.query(statement);
    }
    async down(queryRunner: QueryRunner): Promise<void> {
      for (const statement of down) await queryRunner.query(statement);
    }
  }

  // V2 (WaypointLangGraphSchema1767225600000) created the LangGraph saver's tables; the saver now creates
  // them itself on first use (src/integrations/langgraph/sql-setup.ts) and records that same name, so a
  // database where V2 ran keeps its tables and its record. Never reuse the name.

  // V3: HOT run-row updates on PostgreSQL (see pgHotRunsV3). SQLite has no such thing: recorded, no DDL.
  class WaypointHotRunUpdates implements MigrationInterface {
    name = 'WaypointHotRunUpdates1767312000000';
    async up(queryRunner: QueryRunner): Promise<void> {
      if (dialect === 'postgres') for (const statement of pgHotRunsV3(tables)) await queryRunner.query(statement);
    }
    async down(queryRunner: QueryRunner): Promise<void> {
      if (dialect === 'postgres') for (const statement of pgHotRunsV3Down(tables)) await queryRunner.query(statement);
    }
  }

  // V4: control flow (issue 20): a step row's path, a run's parent (see pgControlFlowV4).
  const controlFlowUp = dialect === 'postgres' ? pgControlFlowV4(tables) : sqliteControlFlowV4(tables);
  const controlFlowDown = dialect === 'postgres' ? pgControlFlowV4Down(tables) : sqliteControlFlowV4Down(tables);
  class WaypointControlFlow implements MigrationInterface {
    name = 'WaypointControlFlow1767398400000';
    async up(queryRunner: QueryRunner): Promise<void> {
      for (const statement of controlFlowUp) await queryRunner.query(statement);
    }
    async down(queryRunner: QueryRunner): Promise<void> {
      for (const statement of controlFlowDown) await queryRunner.query(statement);
    }
  }

  // V5: no per-step run-row rewrite (issue 22): the cursor after each step lives on its step row.
  const stepCursorUp = dialect === 'postgres' ? pgStepCursorV5(tables) : sqliteStepCursorV5(tables);
  const stepCursorDown = dialect === 'postgres' ? pgStepCursorV5Down(tables) : sqliteStepCursorV5Down(tables);
  class WaypointStepCursor implements MigrationInterface {
    name = 'WaypointStepCursor1767484800000';
    async up(queryRunner: QueryRunner): Promise<void> {
      for (const statement of stepCursorUp) await queryRunner.query(statement);
    }
    async down(queryRunner: QueryRunner): Promise<void> {
      for (const statement of stepCursorDown) await queryRunner.query(statement);
    }
  }

  return [WaypointInitialSchema, WaypointHotRunUpdates, WaypointControlFlow, WaypointStepCursor];
}
