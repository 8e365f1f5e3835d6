import { releaseV4Migrations } from '../helpers/previous-release';
import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { DataSource } from 'typeorm';
import { buildMigrations } from '../../src/storage/typeorm/migrations';
import { tableNames } from '../../src/storage/typeorm/sql';
import { TypeOrmCheckpointStore } from '../../src/storage/typeorm/typeorm-store';
import type { TypeOrmStoreOptions } from '../../src/storage/typeorm/options';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { cursorAt, newRun, stepRecord } from '../helpers/store-records';

/**
 * Migration V5 (issue 22: no per-step rewrite of the run row) on a database the previous release (V4) left,
 * and what the new append leaves in the run row. Before V5 every append rewrote the run row's
 * last_sequence, cursor, status and updated_at; from V5 the step row carries the cursor after it, the run
 * row is written only on a status or hint change, and readers derive the live values from the last step.
 */

const V4_RUN_COLUMNS =
  'run_id, pipeline_name, pipeline_version, status, cursor_agent, cursor_step, last_sequence, input, metadata, lease_owner, lease_epoch, lease_expires_at, error, resume_hint, created_at, updated_at, parent_run_id';
const V4_STEP_COLUMNS =
  'run_id, sequence, checkpoint_id, agent_index, agent_id, step_index, step_name, status, output, memory, idempotency_key, side_effects_committed, started_at, completed_at, attempt, sha256, path';

interface Dialect {
  label: 'sqlite' | 'postgres';
  options: TypeOrmStoreOptions;
  /** The DataSource of the previous release (its four migrations). */
  oldDataSource(): DataSource;
  params(n: number): string;
  date(d: Date): unknown;
  bool(b: boolean): unknown;
  table(name: 'runs' | 'steps'): string;
  prepare(): Promise<void>;
  cleanup(): Promise<void>;
}

const SCHEMA = schemaFor('migration step-cursor V5');

function sqlite(): Dialect {
  const { file, remove } = tempSqlitePath();
  const tables = tableNames({ prefix: 'waypoint_' });
  return {
    label: 'sqlite',
    options: { type: 'sqlite', path: file },
    oldDataSource: () => new DataSource({ type: 'better-sqlite3', database: file, migrations: releaseV4Migrations('sqlite', tables), migrationsTableName: tables.migrations }),
    params: (n) => Array.from({ length: n }, () => '?').join(', '),
    date: (d) => d.getTime(),
    bool: (b) => (b ? 1 : 0),
    table: (name) => tables[name],
    prepare: async () => undefined,
    cleanup: async () => remove(),
  };
}

function postgres(): Dialect {
  const tables = tableNames({ schema: SCHEMA, prefix: 'waypoint_' });
  return {
    label: 'postgres',
    options: { type: 'postgres', url: PG_TEST_URL, schema: SCHEMA },
    oldDataSource: () =>
      new DataSource({
        type: 'postgres',
        url: PG_TEST_URL,
        schema: SCHEMA,
        migrations: releaseV4Migrations('postgres', tables),
        migrationsTableName: tables.migrations,
        migrationsTransactionMode: 'all',
      }),
    params: (n) => Array.from({ length: n }, (_, i) => `$${i + 1}`).join(', '),
    date: (d) => d,
    bool: (b) => b,
    table: (name) => tables[name],
    prepare: async () => {
      const boot = new DataSource({ type: 'postgres', url: PG_TEST_URL });
      await boot.initialize();
      await boot.query(`CREATE SCHEMA IF NOT EXISTS "${SCHEMA}"`);
      await boot.destroy();
    },
    cleanup: () => dropSchema(SCHEMA),
  };
}

/** The run row as stored (not as read): what an append did or did not write. */
async function rawRun(store: TypeOrmCheckpointStore, d: Dialect, runId: string): Promise<{ last_sequence: number; cursor_agent: number; cursor_step: number; status: string }> {
  const rows = await store.dataSource.query<
    {
      last_sequence: number;
      cursor_agent: number;
      cursor_step: number;
      status: string;
    }[]
  >(`SELECT last_sequence, cursor_agent, cursor_step, status FROM ${d.table('runs')} WHERE run_id = ${d.params(1)}`, [runId]);
  return { ...rows[0], last_sequence: Number(rows[0].last_sequence), cursor_agent: Number(rows[0].cursor_agent), cursor_step: Number(rows[0].cursor_step) };
}

for (const make of [sqlite, postgres]) {
  describe(`migration V5 (step cursor) on ${make().label}`, () => {
    it('a V4 run reads as it was written, then takes steps without its run row being rewritten', async () => {
      const d = make();
      await d.cleanup(); // a killed earlier run may have left the schema
      await d.prepare();
      const store = new TypeOrmCheckpointStore(d.options);
      try {
        // The previous release: four migrations; its appends kept the run row's sequence and cursor current.
        const old = d.oldDataSource();
        await old.initialize();
        await old.runMigrations({ transaction: 'all' });
        const run = newRun('old');
        const at = new Date(1_700_000_000_123);
        await old.query(`INSERT INTO ${d.table('runs')} (${V4_RUN_COLUMNS}) VALUES (${d.params(17)})`, [
          run.runId,
          run.pipelineName,
          run.pipelineVersion,
          'running',
          1,
          0,
          2,
          run.input,
          run.metadata,
          null,
          3,
          null,
          null,
          null,
          d.date(at),
          d.date(at),
          null,
        ]);
        const steps = [stepRecord('old', 1), stepRecord('old', 2)];
        for (const s of steps) {
          await old.query(`INSERT INTO ${d.table('steps')} (${V4_STEP_COLUMNS}) VALUES (${d.params(17)})`, [
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
            null,
          ]);
        }
        await old.destroy();

        await store.init();
        const names = await store.dataSource.query<{ name: string }[]>(`SELECT name FROM ${d.label === 'postgres' ? `"${SCHEMA}".` : ''}waypoint_migrations ORDER BY id`);
        assert.equal(names.at(-1)?.name, 'WaypointStepCursor1767484800000');
        assert.equal(names.length, 5);

        // Read as written: the run row's cursor (the V4 step rows carry none), sequence and updatedAt.
        const loaded = (await store.loadRun('old'))!;
        assert.deepEqual(loaded.steps, steps);
        const asWritten = { lastSequence: 2, cursorAgent: 1, cursorStep: 0, status: 'running', updatedAt: at.getTime() };
        const view = (r: { lastSequence: number; cursorAgent: number; cursorStep: number; status: string; updatedAt: Date }) => ({
          lastSequence: r.lastSequence,
          cursorAgent: r.cursorAgent,
          cursorStep: r.cursorStep,
          status: r.status,
          updatedAt: r.updatedAt.getTime(),
        });
        assert.deepEqual(view(loaded.run), asWritten);
        assert.deepEqual(view((await store.getRun('old'))!), asWritten);
        assert.deepEqual(view((await store.listRuns())[0]), asWritten);

        // New steps: the run reads their cursor and sequence; its stored row is left alone.
        const grant = (await store.acquireLease('old', 'worker', 60_000))!;
        const step3 = stepRecord('old', 3);
        await store.appendStep({ step: step3, run: cursorAt(0, { cursorAgent: 2 }), fence: { epoch: grant.epoch } });
        const after3 = view((await store.getRun('old'))!);
        assert.deepEqual(after3, { lastSequence: 3, cursorAgent: 2, cursorStep: 0, status: 'running', updatedAt: step3.completedAt.getTime() });
        assert.deepEqual(view((await store.loadRun('old'))!.run), after3);
        assert.deepEqual(view((await store.listRuns({ since: step3.completedAt }))[0]), after3, 'listRuns filters and sorts on the derived updatedAt');
        assert.deepEqual(await rawRun(store, d, 'old'), { last_sequence: 2, cursor_agent: 1, cursor_step: 0, status: 'running' }, 'the run row was not rewritten');

        // Stale appends are refused as before: the same sequence again, a gap, an old epoch.
        for (const [sequence, epoch] of [
          [3, grant.epoch],
          [5, grant.epoch],
          [4, grant.epoch - 1],
        ] as const) {
          await assert.rejects(
            store.appendStep({ step: stepRecord('old', sequence), run: cursorAt(1), fence: { epoch } }),
            (e: { code?: string }) => e.code === 'LEASE_LOST',
            `sequence ${sequence} epoch ${epoch}`,
          );
        }
        assert.equal((await store.listSteps('old')).length, 3);

        // A transition writes the run row, once.
        await store.appendStep({ step: stepRecord('old', 4), run: cursorAt(1, { cursorAgent: 2, status: 'waiting', resumeHint: 'send it' }), fence: { epoch: grant.epoch } });
        assert.deepEqual(await rawRun(store, d, 'old'), { last_sequence: 4, cursor_agent: 2, cursor_step: 1, status: 'waiting' });
        assert.equal((await store.getRun('old'))!.resumeHint, 'send it');
        await store.appendStep({ step: stepRecord('old', 5), run: cursorAt(2, { cursorAgent: 2 }), fence: { epoch: grant.epoch } });
        const resumed = (await store.getRun('old'))!;
        assert.deepEqual([resumed.status, resumed.resumeHint, resumed.lastSequence, resumed.cursorStep], ['running', null, 5, 2]);
        await store.appendStep({ step: stepRecord('old', 6), run: cursorAt(3, { cursorAgent: 2 }), fence: { epoch: grant.epoch } });
        assert.deepEqual(await rawRun(store, d, 'old'), { last_sequence: 5, cursor_agent: 2, cursor_step: 2, status: 'running' }, 'running again: step 6 left the row');
        // Any other write of the run row pins it to its last step: a run at rest names its last row, so a deleted tail shows.
        await store.updateRun('old', { status: 'paused' }, { epoch: grant.epoch });
        assert.deepEqual(await rawRun(store, d, 'old'), { last_sequence: 6, cursor_agent: 2, cursor_step: 3, status: 'paused' });
        assert.deepEqual(view((await store.getRun('old'))!).lastSequence, 6);

        // A truncation and a patched cursor set the run row's cursor, which then wins over the steps'.
        await store.truncateSteps('old', 6, { cursorAgent: 0, cursorStep: 9 }, { epoch: grant.epoch });
        assert.deepEqual([(await store.getRun('old'))!.lastSequence, (await store.getRun('old'))!.cursorAgent, (await store.getRun('old'))!.cursorStep], [5, 0, 9]);
        await store.appendStep({ step: stepRecord('old', 6), run: cursorAt(4, { cursorAgent: 3 }), fence: { epoch: grant.epoch } });
        await store.updateRun('old', { cursorAgent: 7, cursorStep: 1 }, null);
        const patched = (await store.getRun('old'))!;
        assert.deepEqual([patched.lastSequence, patched.cursorAgent, patched.cursorStep], [6, 7, 1]);
      } finally {
        await store.close();
        await d.cleanup();
      }
    });
  });
}
