import { DataSource, type MigrationInterface } from 'typeorm';
import type { NewRun, StepRecord } from '../../src/contract/checkpoint-store';
import { tableNames, type Dialect, type Tables } from '../../src/storage/sql/sql';
import type { TypeOrmStoreOptions } from '../../src/storage/sql/options';
import { dropSchema, PG_TEST_URL, schemaFor } from './pg-schema';
import { tempSqlitePath } from './sqlite-temp';

/**
 * A SQL database (SQLite file or PostgreSQL schema) set up the way an earlier release left it, for the
 * migration tests: the earlier release's migrations are run through their own DataSource, rows are
 * inserted with that release's column lists, then this release's store opens the same database.
 */

/** Columns of the run and step rows up to V3 (the release before control flow), frozen: never derive them from today's lists. */
export const V3_RUN_COLUMNS = (
  'run_id, pipeline_name, pipeline_version, status, cursor_agent, cursor_step, last_sequence, input, metadata, lease_owner, lease_epoch, ' +
  'lease_expires_at, error, resume_hint, created_at, updated_at'
).split(', ');
export const V3_STEP_COLUMNS = (
  'run_id, sequence, checkpoint_id, agent_index, agent_id, step_index, step_name, status, output, memory, idempotency_key, ' +
  'side_effects_committed, started_at, completed_at, attempt, sha256'
).split(', ');
/** V4 (control flow) added a run's parent and a step's path. */
export const V4_RUN_COLUMNS = [...V3_RUN_COLUMNS, 'parent_run_id'];
export const V4_STEP_COLUMNS = [...V3_STEP_COLUMNS, 'path'];

/** The run row's values an earlier release wrote that a test chooses (the rest come from the record). */
export interface OldRunRow {
  status: string;
  cursorAgent: number;
  cursorStep: number;
  lastSequence: number;
  leaseEpoch: number;
  resumeHint: string | null;
  at: Date;
}

export interface OldReleaseDb {
  label: 'sqlite' | 'postgres';
  /** This release's store on the same database. */
  options: TypeOrmStoreOptions;
  /** `?` (SQLite) or `$n` (PostgreSQL) placeholders for n values. */
  params(n: number): string;
  /** Qualified table name. */
  table(name: 'runs' | 'steps'): string;
  /** Drops what a killed earlier run may have left, and (PostgreSQL) creates the schema. */
  prepare(): Promise<void>;
  /**
   * Runs the earlier release's migrations on the database, then `write` on its DataSource, then closes it.
   */
  asOldRelease(write: (old: DataSource) => Promise<void>): Promise<void>;
  /** Inserts a run row with `columns` (V3 or V4 lists; columns past V3 get null). */
  insertRun(old: DataSource, columns: string[], run: NewRun, row: OldRunRow): Promise<void>;
  /** Inserts step rows with `columns` (V3 or V4 lists; columns past V3 get null). */
  insertSteps(old: DataSource, columns: string[], steps: StepRecord[]): Promise<void>;
  /** Migration names recorded, in the order they were applied. */
  migrationNames(store: { dataSource: DataSource }): Promise<string[]>;
  cleanup(): Promise<void>;
}

type ReleaseMigrations = (dialect: Dialect, tables: Tables) => Array<new () => MigrationInterface>;

/**
 * The SQLite and PostgreSQL databases of one migration test, each left by the earlier release whose
 * migrations `migrations` lists. The PostgreSQL schema is named from `testName` (see schemaFor).
 *
 * @example
 * for (const make of oldReleaseDbs('migration V5', releaseV4Migrations)) { const d = make(); ... }
 */
export function oldReleaseDbs(testName: string, migrations: ReleaseMigrations): Array<() => OldReleaseDb> {
  return [() => sqliteDb(migrations), () => postgresDb(schemaFor(testName), migrations)];
}

function sqliteDb(migrations: ReleaseMigrations): OldReleaseDb {
  const { file, remove } = tempSqlitePath();
  const tables = tableNames({ prefix: 'waypoint_' });
  return withRows({
    label: 'sqlite',
    options: { type: 'sqlite', path: file },
    tables,
    oldDataSource: () => new DataSource({ type: 'better-sqlite3', database: file, migrations: migrations('sqlite', tables), migrationsTableName: tables.migrations }),
    params: (n) => Array.from({ length: n }, () => '?').join(', '),
    date: (d) => d.getTime(),
    bool: (b) => (b ? 1 : 0),
    prepare: () => Promise.resolve(),
    cleanup: () => Promise.resolve(remove()),
  });
}

function postgresDb(schema: string, migrations: ReleaseMigrations): OldReleaseDb {
  const tables = tableNames({ schema, prefix: 'waypoint_' });
  return withRows({
    label: 'postgres',
    options: { type: 'postgres', url: PG_TEST_URL, schema },
    tables,
    oldDataSource: () =>
      new DataSource({
        type: 'postgres',
        url: PG_TEST_URL,
        schema,
        migrations: migrations('postgres', tables),
        migrationsTableName: tables.migrations,
        migrationsTransactionMode: 'all',
      }),
    params: (n) => Array.from({ length: n }, (_, i) => `$${i + 1}`).join(', '),
    date: (d) => d,
    bool: (b) => b,
    prepare: async () => {
      await dropSchema(schema);
      const boot = new DataSource({ type: 'postgres', url: PG_TEST_URL });
      await boot.initialize();
      await boot.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
      await boot.destroy();
    },
    cleanup: () => dropSchema(schema),
  });
}

interface DialectParts {
  label: 'sqlite' | 'postgres';
  options: TypeOrmStoreOptions;
  tables: Tables;
  oldDataSource: () => DataSource;
  params: (n: number) => string;
  date: (d: Date) => unknown;
  bool: (b: boolean) => unknown;
  prepare: () => Promise<void>;
  cleanup: () => Promise<void>;
}

function withRows(d: DialectParts): OldReleaseDb {
  const insert = (old: DataSource, table: 'runs' | 'steps', columns: string[], values: unknown[]) =>
    old.query(`INSERT INTO ${d.tables[table]} (${columns.join(', ')}) VALUES (${d.params(columns.length)})`, [...values, ...columns.slice(values.length).map(() => null)]);
  return {
    label: d.label,
    options: d.options,
    params: d.params,
    table: (name) => d.tables[name],
    prepare: d.prepare,
    cleanup: d.cleanup,
    async asOldRelease(write) {
      const old = d.oldDataSource();
      await old.initialize();
      try {
        await old.runMigrations({ transaction: 'all' });
        await write(old);
      } finally {
        await old.destroy();
      }
    },
    async insertRun(old, columns, run, row) {
      await insert(old, 'runs', columns, [
        run.runId,
        run.pipelineName,
        run.pipelineVersion,
        row.status,
        row.cursorAgent,
        row.cursorStep,
        row.lastSequence,
        run.input,
        run.metadata,
        null,
        row.leaseEpoch,
        null,
        null,
        row.resumeHint,
        d.date(row.at),
        d.date(row.at),
      ]);
    },
    async insertSteps(old, columns, steps) {
      for (const s of steps) {
        await insert(old, 'steps', columns, [
          s.runId,
          s.sequence,
          s.checkpointId,
          s.agentIndex,
          s.agentId,
          s.stepIndex,
          s.stepName,
          s.status,
          s.output,
          s.memory,
          s.idempotencyKey,
          d.bool(s.sideEffectsCommitted),
          d.date(s.startedAt),
          d.date(s.completedAt),
          s.attempt,
          s.sha256,
        ]);
      }
    },
    async migrationNames(store) {
      const qualified = d.tables.schema ? `${d.tables.schema}.${d.tables.migrations}` : d.tables.migrations;
      const rows = await store.dataSource.query<{ name: string }[]>(`SELECT name FROM ${qualified} ORDER BY id`);
      return rows.map((r) => r.name);
    },
  };
}
