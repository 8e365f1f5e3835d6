/**
 * The LangGraph tables belong to the LangGraph saver (issue 18): a SQL store that never meets a saver has
 * none; the saver's first call creates them beside the store's tables under the store's migration lock
 * and records them once, however many savers start together; a database where the previous release's
 * store migration (V2) created them keeps its tables, its record and its checkpoints; and the previous
 * release, opening a database set up by this one, finds nothing to create. SQLite and PostgreSQL.
 */
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { WaypointCheckpointSaver } from '../../src/integrations/langgraph';
import { buildMigrations } from '../../src/storage/sql/migrations';
import { type Tables, tableNames } from '../../src/storage/sql/sql';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import type { TypeOrmStoreOptions } from '../../src/storage/sql/options';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { PREVIOUS_RELEASE, previousReleaseMigrations } from '../helpers/previous-release';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { newRun } from '../helpers/store-records';
import { cfg, checkpoint, ids, meta } from './langgraph-harness';

const LANGGRAPH_V2 = 'WaypointLangGraphSchema1767225600000';

interface Database {
  options: TypeOrmStoreOptions;
  tables: Tables;
  /** A DataSource of TypeORM's own on the database (not a store), for setting up and inspecting it. */
  dataSource(migrations: DataSourceOptions['migrations']): DataSource;
  /** Names of the LangGraph tables, with a dialect detail: STRICT on SQLite, the collation of checkpoint_id on PostgreSQL. */
  langGraphTables(ds: DataSource): Promise<string[]>;
  migrations(ds: DataSource): Promise<string[]>;
  cleanup(): Promise<void>;
}

function sqlite(): Database {
  const { file, remove } = tempSqlitePath();
  const tables = tableNames({ prefix: 'waypoint_' });
  return {
    options: { type: 'sqlite', path: file },
    tables,
    dataSource: (migrations) => new DataSource({ type: 'better-sqlite3', database: file, migrations, migrationsTableName: tables.migrations }),
    langGraphTables: async (ds) =>
      (await ds.query<{ name: string; strict: number }[]>(`SELECT name, strict FROM pragma_table_list WHERE name LIKE 'waypoint_langgraph_%' ORDER BY name`)).map(
        (t) => `${t.name}${t.strict ? ' STRICT' : ''}`,
      ),
    migrations: async (ds) => (await ds.query<{ name: string }[]>('SELECT name FROM waypoint_migrations ORDER BY id')).map((r) => r.name),
    cleanup: () => Promise.resolve(remove()),
  };
}

function postgres(name: string): Database {
  const schema = schemaFor(`langgraph tables ${process.pid} ${name}`);
  const tables = tableNames({ schema, prefix: 'waypoint_' });
  return {
    options: { type: 'postgres', url: PG_TEST_URL, schema },
    tables,
    dataSource: (migrations) =>
      new DataSource({ type: 'postgres', url: PG_TEST_URL, schema, migrations, migrationsTableName: tables.migrations, migrationsTransactionMode: 'all' }),
    langGraphTables: async (ds) =>
      (
        await ds.query<{ table_name: string; collation_name: string | null }[]>(
          `SELECT t.table_name, c.collation_name FROM information_schema.tables t LEFT JOIN information_schema.columns c
             ON c.table_schema = t.table_schema AND c.table_name = t.table_name AND c.column_name = 'checkpoint_id'
           WHERE t.table_schema = $1 AND t.table_name LIKE 'waypoint_langgraph_%' ORDER BY t.table_name`,
          [schema],
        )
      ).map((t) => `${t.table_name}${t.collation_name ? ` COLLATE ${t.collation_name}` : ''}`),
    migrations: async (ds) => (await ds.query<{ name: string }[]>(`SELECT name FROM "${schema}".waypoint_migrations ORDER BY id`)).map((r) => r.name),
    cleanup: () => dropSchema(schema),
  };
}

const CURRENT = buildMigrations('sqlite', tableNames({ prefix: 'waypoint_' })).map((m) => new m().name ?? '');
const EXPECTED: Record<'sqlite' | 'postgres', string[]> = {
  sqlite: ['waypoint_langgraph_blobs STRICT', 'waypoint_langgraph_checkpoints STRICT', 'waypoint_langgraph_threads STRICT', 'waypoint_langgraph_writes STRICT'],
  postgres: ['waypoint_langgraph_blobs', 'waypoint_langgraph_checkpoints COLLATE C', 'waypoint_langgraph_threads', 'waypoint_langgraph_writes COLLATE C'],
};

async function withDatabase(label: 'sqlite' | 'postgres', name: string, fn: (db: Database, stores: TypeOrmCheckpointStore[]) => Promise<void>): Promise<void> {
  const db = label === 'sqlite' ? sqlite() : postgres(name);
  await db.cleanup(); // a killed earlier run may have left the schema
  if (label === 'postgres') await inspect(db, (ds) => ds.query(`CREATE SCHEMA ${db.tables.schema}`)); // the previous release's store made it
  const stores: TypeOrmCheckpointStore[] = [];
  try {
    await fn(db, stores);
  } finally {
    for (const store of stores) await store.close();
    await db.cleanup();
  }
}

/** A DataSource on the database, initialized, for the length of `fn`. */
async function inspect<T>(db: Database, fn: (ds: DataSource) => Promise<T>, migrations: DataSourceOptions['migrations'] = []): Promise<T> {
  const ds = db.dataSource(migrations);
  await ds.initialize();
  try {
    return await fn(ds);
  } finally {
    await ds.destroy();
  }
}

for (const label of ['sqlite', 'postgres'] as const) {
  describe(`LangGraph tables on ${label}: the saver's own`, () => {
    it('a store used without LangGraph has no LangGraph tables; the first saver calls create and record them once', () =>
      withDatabase(label, 'fresh', async (db, stores) => {
        for (let i = 0; i < 3; i++) stores.push(new TypeOrmCheckpointStore(db.options));
        await Promise.all(stores.map((s) => s.init()));
        await stores[0].createRun(newRun('no-langgraph'));
        assert.deepEqual(await inspect(db, (ds) => db.langGraphTables(ds)), []);
        assert.deepEqual(await inspect(db, (ds) => db.migrations(ds)), CURRENT);

        // Three savers, each on its own store of the one database, start together.
        const savers = stores.map((store) => new WaypointCheckpointSaver({ store }));
        const [a, b, c] = ids('c', 3);
        await Promise.all(savers.map((saver, i) => saver.put(cfg(`thread-${i}`), checkpoint([a, b, c][i], { n: i }, { n: 1 }), meta(0), { n: 1 })));
        assert.deepEqual(await inspect(db, (ds) => db.langGraphTables(ds)), EXPECTED[label]);
        assert.deepEqual(await inspect(db, (ds) => db.migrations(ds)), [...CURRENT, LANGGRAPH_V2]);
        for (let i = 0; i < 3; i++) assert.deepEqual((await savers[(i + 1) % 3].getTuple(cfg(`thread-${i}`)))?.checkpoint.channel_values, { n: i });

        // A store reopened (a new DataSource) and a new saver find the tables and create nothing.
        await stores[0].close();
        const again = new WaypointCheckpointSaver({ store: stores[0] });
        assert.deepEqual((await again.getTuple(cfg('thread-2')))?.checkpoint.channel_values, { n: 2 });
        assert.deepEqual(await inspect(db, (ds) => db.migrations(ds)), [...CURRENT, LANGGRAPH_V2]);
      }));

    it("a database whose tables the previous release's store migration created keeps them and its checkpoints", () =>
      withDatabase(label, 'previous release', async (db, stores) => {
        // The previous release: V1, V2 (the LangGraph tables, made by the store), V3.
        await inspect(db, (ds) => ds.runMigrations({ transaction: 'all' }), previousReleaseMigrations(label === 'sqlite' ? 'sqlite' : 'postgres', db.tables));
        assert.deepEqual(await inspect(db, (ds) => db.langGraphTables(ds)), EXPECTED[label]);

        // This release: the store applies what is new to it, the saver finds its tables recorded.
        const store = new TypeOrmCheckpointStore(db.options);
        stores.push(store);
        const saver = new WaypointCheckpointSaver({ store });
        const [c1, c2] = ids('p', 2);
        await saver.put(cfg('t'), checkpoint(c1, { a: 'kept' }, { a: 1 }), meta(0), { a: 1 });
        await saver.put(cfg('t', c1), checkpoint(c2, { a: 'kept', b: 2 }, { a: 1, b: 1 }), meta(1), { b: 1 });
        assert.deepEqual(await inspect(db, (ds) => db.migrations(ds)), [...PREVIOUS_RELEASE, ...CURRENT.filter((n) => !PREVIOUS_RELEASE.includes(n))]);

        // After a restart the checkpoints load.
        await store.close();
        const reopened = new TypeOrmCheckpointStore(db.options);
        stores.push(reopened);
        const tuple = await new WaypointCheckpointSaver({ store: reopened }).getTuple(cfg('t'));
        assert.deepEqual(tuple?.checkpoint.channel_values, { a: 'kept', b: 2 });
        assert.equal(tuple?.parentConfig?.configurable?.checkpoint_id, c1);
      }));

    it('the previous release, opening a database whose tables the saver created, has nothing to create', () =>
      withDatabase(label, 'downgrade', async (db, stores) => {
        const store = new TypeOrmCheckpointStore(db.options);
        stores.push(store);
        await new WaypointCheckpointSaver({ store }).put(cfg('t'), checkpoint('d-1', { x: 1 }, { x: 1 }), meta(0), { x: 1 });
        await store.close();
        const dialect = label === 'sqlite' ? 'sqlite' : 'postgres';
        const previous = [...previousReleaseMigrations(dialect, db.tables), ...buildMigrations(dialect, db.tables).slice(2)];
        assert.equal(await inspect(db, (ds) => ds.showMigrations(), previous), false, 'no migration of the previous release is pending');
      }));
  });
}
