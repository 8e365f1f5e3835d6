import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { DataSource } from 'typeorm';
import { checkRows, linkOf, runIdentity, stepDigest } from '../../src/core/row-integrity';
import type { StepRecord } from '../../src/storage/checkpoint-store';
import { tableNames } from '../../src/storage/typeorm/sql';
import { TypeOrmCheckpointStore } from '../../src/storage/typeorm/typeorm-store';
import type { TypeOrmStoreOptions } from '../../src/storage/typeorm/options';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { PREVIOUS_RELEASE, previousReleaseMigrations } from '../helpers/previous-release';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { cursorAt, newRun, stepRecord } from '../helpers/store-records';

/**
 * Migration V4 (control flow, issue 20) on a database the previous release left: the schema of the
 * first three migrations, a run and its sealed steps inserted with the old column lists. Opening the
 * store applies V4; the old run then loads with `path: null` / `parentRunId: null`, its digests still
 * verify, and it takes new steps with a path.
 */

const OLD_RUN_COLUMNS =
  'run_id, pipeline_name, pipeline_version, status, cursor_agent, cursor_step, last_sequence, input, metadata, lease_owner, lease_epoch, lease_expires_at, error, resume_hint, created_at, updated_at';
const OLD_STEP_COLUMNS =
  'run_id, sequence, checkpoint_id, agent_index, agent_id, step_index, step_name, status, output, memory, idempotency_key, side_effects_committed, started_at, completed_at, attempt, sha256';

interface Dialect {
  label: string;
  options: TypeOrmStoreOptions;
  /** The DataSource options of the previous release (its three migrations). */
  oldDataSource(): DataSource;
  /** `?` (SQLite) or `$n` (PostgreSQL) placeholders for n values. */
  params(n: number): string;
  date(d: Date): unknown;
  bool(b: boolean): unknown;
  /** Qualified table name. */
  table(name: 'runs' | 'steps'): string;
  cleanup(): Promise<void>;
}

function sqlite(): Dialect {
  const { file, remove } = tempSqlitePath();
  const tables = tableNames({ prefix: 'waypoint_' });
  return {
    label: 'sqlite',
    options: { type: 'sqlite', path: file },
    oldDataSource: () =>
      new DataSource({ type: 'better-sqlite3', database: file, migrations: previousReleaseMigrations('sqlite', tables), migrationsTableName: tables.migrations }),
    params: (n) => Array.from({ length: n }, () => '?').join(', '),
    date: (d) => d.getTime(),
    bool: (b) => (b ? 1 : 0),
    table: (name) => tables[name],
    cleanup: async () => remove(),
  };
}

function postgres(): Dialect {
  const schema = schemaFor('migration control-flow V4');
  const tables = tableNames({ schema, prefix: 'waypoint_' });
  return {
    label: 'postgres',
    options: { type: 'postgres', url: PG_TEST_URL, schema },
    oldDataSource: () =>
      new DataSource({
        type: 'postgres',
        url: PG_TEST_URL,
        schema,
        migrations: previousReleaseMigrations('postgres', tables),
        migrationsTableName: tables.migrations,
        migrationsTransactionMode: 'all',
      }),
    params: (n) => Array.from({ length: n }, (_, i) => `$${i + 1}`).join(', '),
    date: (d) => d,
    bool: (b) => b,
    table: (name) => tables[name],
    cleanup: () => dropSchema(schema),
  };
}

/** Steps 1..count of the old run, sealed (chained) as the previous release sealed them: no path. */
function oldSteps(count: number): StepRecord[] {
  const run = newRun('old');
  const identity = runIdentity(run);
  const rows: StepRecord[] = [];
  for (let sequence = 1; sequence <= count; sequence++) {
    const { sha256: _placeholder, path: _path, ...rest } = stepRecord('old', sequence);
    rows.push({ ...rest, sha256: stepDigest(rest, {}, { identity, prev: sequence === 1 ? '' : linkOf(rows[sequence - 2]) }) });
  }
  return rows;
}

for (const [label, make] of [
  ['sqlite', sqlite],
  ['postgres', postgres],
] as const) {
  describe(`migration V4 (control flow) on ${label}`, () => {
    it('an old run loads with path and parentRunId null, still verifies, and takes steps with a path', async () => {
      const d = make();
      await d.cleanup(); // a killed earlier run may have left the schema
      if (d.label === 'postgres') {
        const boot = new DataSource({ type: 'postgres', url: PG_TEST_URL });
        await boot.initialize();
        await boot.query(`CREATE SCHEMA IF NOT EXISTS "${schemaFor('migration control-flow V4')}"`);
        await boot.destroy();
      }
      const store = new TypeOrmCheckpointStore(d.options);
      try {
        // The previous release: three migrations, rows written with its column lists.
        const old = d.oldDataSource();
        await old.initialize();
        await old.runMigrations({ transaction: 'all' });
        const steps = oldSteps(2);
        const run = newRun('old');
        const at = new Date(1_700_000_000_123);
        await old.query(`INSERT INTO ${d.table('runs')} (${OLD_RUN_COLUMNS}) VALUES (${d.params(16)})`, [
          run.runId,
          run.pipelineName,
          run.pipelineVersion,
          'paused',
          0,
          2,
          2,
          run.input,
          run.metadata,
          null,
          3,
          null,
          null,
          'resume me',
          d.date(at),
          d.date(at),
        ]);
        for (const s of steps) {
          await old.query(`INSERT INTO ${d.table('steps')} (${OLD_STEP_COLUMNS}) VALUES (${d.params(16)})`, [
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
        await old.destroy();

        // This release: init applies V4 (and V5).
        await store.init();
        const names = await store.dataSource.query<{ name: string }[]>(
          `SELECT name FROM ${d.label === 'postgres' ? `"${schemaFor('migration control-flow V4')}".` : ''}waypoint_migrations ORDER BY id`,
        );
        assert.deepEqual(
          names.map((n) => n.name),
          [...PREVIOUS_RELEASE, 'WaypointControlFlow1767398400000', 'WaypointStepCursor1767484800000'],
        );
        const loaded = (await store.loadRun('old'))!;
        assert.equal(loaded.run.parentRunId, null);
        assert.equal(loaded.run.resumeHint, 'resume me');
        assert.deepEqual(
          loaded.steps,
          steps.map((s) => ({ ...s, path: null })),
        );
        assert.deepEqual(checkRows(loaded.run, loaded.steps, {}), [], 'digests written before V4 still verify');
        assert.equal((await store.getRun('old'))?.parentRunId, null);
        assert.deepEqual(
          (await store.listRuns()).map((r) => [r.runId, r.parentRunId]),
          [['old', null]],
        );

        // The old run goes on, now with a path; a child run is listed under it.
        const grant = (await store.acquireLease('old', 'worker', 60_000))!;
        assert.equal(grant.epoch, 4);
        const { sha256: _s, ...next } = stepRecord('old', 3, { path: 'parallel[1]/Docs/search' });
        const sealed = { ...next, sha256: stepDigest(next, {}, { identity: runIdentity(run), prev: linkOf(steps[1]) }) };
        await store.appendStep({ step: sealed, run: cursorAt(3), fence: { epoch: grant.epoch } });
        await store.createRun(newRun('child', { parentRunId: 'old' }));
        const after = (await store.loadRun('old'))!;
        assert.deepEqual(
          after.steps.map((s) => s.path),
          [null, null, 'parallel[1]/Docs/search'],
        );
        assert.deepEqual(checkRows(after.run, after.steps, {}), []);
        assert.deepEqual(
          (await store.listRuns({ parentRunId: 'old' })).map((r) => r.runId),
          ['child'],
        );

        // A path changed in the database behind the store's back fails its row's check.
        await store.dataSource.query(`UPDATE ${d.table('steps')} SET path = ${d.params(1)} WHERE run_id = 'old' AND sequence = 3`, ['parallel[2]/Docs/search']);
        const tampered = (await store.loadRun('old'))!;
        assert.deepEqual(
          checkRows(tampered.run, tampered.steps, {}).map((p) => p.sequence),
          [3],
        );
        // And so does a path added to a row sealed without one.
        await store.dataSource.query(`UPDATE ${d.table('steps')} SET path = ${d.params(1)} WHERE run_id = 'old' AND sequence = 1`, ['research/step1']);
        const added = (await store.loadRun('old'))!;
        assert.deepEqual(
          checkRows(added.run, added.steps, {}).map((p) => p.sequence),
          [1, 3],
        );
      } finally {
        await store.close();
        await d.cleanup();
      }
    });
  });
}
