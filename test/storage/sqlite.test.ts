import type { CheckpointStore } from '../../src/contract/checkpoint-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { runStoreConformance } from '../../src/testing';

// One temp file per test; `sibling` opens a second store (connection) on the same file.
runStoreConformance({
  name: 'sqlite',
  makeStore: () => {
    const { file, remove } = tempSqlitePath();
    const stores: CheckpointStore[] = [];
    const open = () => (stores.push(new TypeOrmCheckpointStore({ type: 'sqlite', path: file })), stores.at(-1)!);
    return Promise.resolve({ store: open(), sibling: open, cleanup: async () => (await Promise.all(stores.map((s) => s.close())), remove()) });
  },
});

// ---- SQLite specifics: pragmas, migrations under the write lock, default path, errors, DI ----
import { strict as assert } from 'node:assert';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Container } from 'inversify';
import { TOKENS } from '../../src/contract/tokens';
import { sqliteStorage } from '../../src/storage/modules';
import { buildMigrations } from '../../src/storage/sql/migrations';
import { tableNames } from '../../src/storage/sql/sql';
import { newRun, withCode } from '../helpers/store-records';

async function withFile(fn: (file: string, stores: TypeOrmCheckpointStore[]) => Promise<void>): Promise<void> {
  const { file, remove } = tempSqlitePath();
  const stores: TypeOrmCheckpointStore[] = [];
  try {
    await fn(file, stores);
  } finally {
    await Promise.all(stores.map((s) => s.close()));
    remove();
  }
}

describe('sqlite store specifics', () => {
  it('opens in WAL with synchronous FULL by default (NORMAL on request) and creates the parent directory', () =>
    withFile(async (file, stores) => {
      const full = new TypeOrmCheckpointStore({ type: 'sqlite', path: file });
      const normal = new TypeOrmCheckpointStore({ type: 'sqlite', path: file, synchronous: 'NORMAL' });
      stores.push(full, normal);
      await full.init();
      await normal.init();
      assert.ok(existsSync(file));
      assert.deepEqual(await full.dataSource.query('PRAGMA journal_mode'), [{ journal_mode: 'wal' }]);
      assert.deepEqual(await full.dataSource.query('PRAGMA synchronous'), [{ synchronous: 2 }]);
      assert.deepEqual(await normal.dataSource.query('PRAGMA synchronous'), [{ synchronous: 1 }]);
    }));

  it('records the migration once, whoever initializes; the tables are STRICT', () =>
    withFile(async (file, stores) => {
      for (let i = 0; i < 3; i++) stores.push(new TypeOrmCheckpointStore({ type: 'sqlite', path: file }));
      await Promise.all(stores.map((s) => s.init()));
      const migrations: unknown = await stores[0].dataSource.query('SELECT name FROM waypoint_migrations ORDER BY id');
      assert.deepEqual(migrations, [
        { name: 'WaypointInitialSchema1735689600000' },
        { name: 'WaypointHotRunUpdates1767312000000' },
        { name: 'WaypointControlFlow1767398400000' },
        { name: 'WaypointStepCursor1767484800000' },
        { name: 'WaypointRunStreams1767571200000' },
        { name: 'WaypointStreamBatches1767657600000' },
      ]);
      const tables: unknown = await stores[0].dataSource.query(`SELECT name, strict FROM pragma_table_list WHERE name LIKE 'waypoint_%' ORDER BY name`);
      assert.deepEqual(tables, [
        { name: 'waypoint_events', strict: 1 },
        { name: 'waypoint_migrations', strict: 0 },
        { name: 'waypoint_operations', strict: 1 },
        { name: 'waypoint_runs', strict: 1 },
        { name: 'waypoint_steps', strict: 1 },
        { name: 'waypoint_stream_batches', strict: 1 },
      ]);
    }));

  it('processes initializing one fresh file at once all succeed (BEGIN IMMEDIATE serializes them)', () =>
    withFile(async (file) => {
      const storeModule = path.resolve(__dirname, '../../src/storage/sql/typeorm-store.js');
      const script = `const { TypeOrmCheckpointStore } = require(${JSON.stringify(storeModule)});
        (async () => { const s = new TypeOrmCheckpointStore({ type: 'sqlite', path: process.argv[1] });
          await s.init(); await s.createRun({ runId: 'r-' + process.pid, pipelineName: 'p', pipelineVersion: '1', input: '{}', metadata: '{}' });
          await s.close(); })().catch((e) => { console.error(e); process.exit(1); });`;
      const run = promisify(execFile);
      // allSettled: every child has exited before the temp dir is removed, even when one fails.
      const results = await Promise.allSettled(Array.from({ length: 4 }, () => run(process.execPath, ['-e', script, file])));
      for (const r of results) if (r.status === 'rejected') throw r.reason;
      const store = new TypeOrmCheckpointStore({ type: 'sqlite', path: file });
      await store.init();
      assert.equal((await store.listRuns()).length, 4);
      assert.equal(
        (await store.dataSource.query<{ n: number }[]>('SELECT count(*) AS n FROM waypoint_migrations'))[0].n,
        buildMigrations('sqlite', tableNames({ prefix: 'waypoint_' })).length,
      );
      await store.close();
    }));

  it('tablePrefix keeps two stores in one file apart', () =>
    withFile(async (file, stores) => {
      const a = new TypeOrmCheckpointStore({ type: 'sqlite', path: file });
      const b = new TypeOrmCheckpointStore({ type: 'sqlite', path: file, tablePrefix: 'other_' });
      stores.push(a, b);
      await Promise.all([a.init(), b.init()]);
      await a.createRun(newRun('only-in-a'));
      assert.equal(await b.getRun('only-in-a'), null);
    }));

  it('defaults to ./.waypoint/waypoint.db under the working directory', async () => {
    const dir = realpathSync(mkdtempSync(path.join(tmpdir(), 'waypoint-cwd-')));
    const previous = process.cwd();
    process.chdir(dir);
    let store: TypeOrmCheckpointStore;
    try {
      store = new TypeOrmCheckpointStore({ type: 'sqlite' }); // the path is resolved here
    } finally {
      process.chdir(previous);
    }
    try {
      await store.init();
      assert.ok(existsSync(path.join(dir, '.waypoint', 'waypoint.db')));
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('driver failures surface as STORE_UNAVAILABLE naming the backend and the operation', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'waypoint-bad-'));
    writeFileSync(path.join(dir, 'file'), 'not a directory');
    const store = new TypeOrmCheckpointStore({ type: 'sqlite', path: path.join(dir, 'file', 'waypoint.db') });
    try {
      await assert.rejects(store.init(), (err: Error) => withCode('STORE_UNAVAILABLE')(err) && /\(sqlite\).*init/.test(err.message));
      await assert.rejects(store.createRun(newRun('r1')), withCode('STORE_UNAVAILABLE'), 'not initialized');
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
    await withFile(async (file) => {
      const closed = new TypeOrmCheckpointStore({ type: 'sqlite', path: file });
      await closed.init();
      await closed.createRun(newRun('r1'));
      await closed.close();
      await assert.rejects(closed.getRun('r1'), withCode('STORE_UNAVAILABLE'), 'closed');
      await closed.init(); // reopens
      assert.equal((await closed.getRun('r1'))?.runId, 'r1');
      await closed.close();
    });
  });

  it('rejects bad options when the module is configured', () => {
    assert.throws(() => sqliteStorage({ tablePrefix: 'x"; DROP TABLE y; --' }), withCode('INVALID_STORE_OPTIONS'));
    assert.throws(() => sqliteStorage({ synchronous: 'OFF' as 'FULL' }), withCode('INVALID_STORE_OPTIONS'));
  });

  it('sqliteStorage() binds a TypeOrmCheckpointStore as the checkpoint store', () =>
    withFile((file, stores) => {
      const container = new Container();
      container.load(sqliteStorage({ path: file }));
      const store = container.get(TOKENS.CheckpointStore);
      assert.ok(store instanceof TypeOrmCheckpointStore);
      assert.equal(store.backend, 'sqlite');
      stores.push(store);
      return Promise.resolve();
    }));
});
