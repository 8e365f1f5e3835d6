import { strict as assert } from 'node:assert';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Client } from 'pg';
import { pgStreamV7Down } from '../../src/storage/sql/sql-stream';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { cursorAt, leasedRun, stepRecord } from '../helpers/store-records';
import { tableNames } from '../../src/storage/sql/sql';
import { spawnNode } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';

const CHILD = resolve(__dirname, 'cold-start-child.js');
const REPORT = resolve(__dirname, 'cold-start-report.js');
const CLI = resolve(__dirname, '../../src/cli/main.js');
const REDIS_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

interface ChildReport {
  status: string;
  runs: string[];
  steps?: { run_id: string; step_name: string }[];
  /** TypeORM modules in require.cache once the run was closed, and at the end. */
  afterRun: number;
  typeorm: number;
}

/** The store URL the child and the CLI take: the test database, in the test's own schema. */
function storeUrl(schema: string): string {
  return `${PG_TEST_URL}?schema=${schema}`;
}

async function program(schema: string, runId: string, ...mode: string[]): Promise<ChildReport> {
  const exit = await spawnNode(CHILD, [storeUrl(schema), runId, ...mode], { WAYPOINT_TEST_REDIS_URL: REDIS_URL }).exited;
  assert.equal(exit.code, 0, `the child failed: ${exit.stderr}`);
  return JSON.parse(exit.lines.at(-1)!) as ChildReport;
}

/** Runs the CLI on `schema` with `args`: its output and the TypeORM modules it loaded. */
async function cli(schema: string, args: string[]): Promise<{ stdout: string; typeorm: number }> {
  const exit = await spawnNode(CLI, ['--store', storeUrl(schema), ...args], { NODE_OPTIONS: `--require ${REPORT}` }).exited;
  assert.equal(exit.code, 0, `waypoint-durable ${args.join(' ')} failed: ${exit.stderr}`);
  const last = exit.stderr.trim().split('\n').at(-1) ?? '{}';
  return { stdout: exit.stdout, typeorm: (JSON.parse(last) as { typeormModules: number }).typeormModules };
}

/** `sql` on a short-lived connection of its own. */
async function raw<T>(sql: string): Promise<T[]> {
  const client = new Client({ connectionString: PG_TEST_URL });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

/** A fresh schema for the test, dropped after it. */
async function inSchema(testName: string, body: (schema: string) => Promise<void>): Promise<void> {
  const schema = schemaFor(`cold start postgres: ${testName}`);
  await dropSchema(schema);
  try {
    await body(schema);
  } finally {
    await dropSchema(schema);
  }
}

// Issue 40 on PostgreSQL: a program whose schema is current loads no TypeORM module; TypeORM comes in only
// to migrate and for what needs it (store.dataSource, transactional side effects).
describe('cold start without TypeORM (PostgreSQL)', () => {
  it('a program on a current schema runs and reads back without loading any TypeORM module', () =>
    inSchema('current', async (schema) => {
      // A new schema: the first program migrates, through TypeORM (this also shows the count sees TypeORM).
      const first = await program(schema, 'first');
      assert.equal(first.status, 'completed');
      assert.ok(first.typeorm > 0, 'migrating a new schema loads TypeORM');
      const second = await program(schema, 'second');
      assert.equal(second.status, 'completed');
      assert.deepEqual(second.runs, ['first', 'second']);
      assert.equal(second.typeorm, 0, `a current schema loaded ${second.typeorm} TypeORM modules`);
    }));

  it('an older schema (a migration not yet recorded) is migrated through TypeORM, then the next start skips it', () =>
    inSchema('older', async (schema) => {
      await program(schema, 'first');
      // Undo the last migration (V7, stream batches) by hand, as a database of the previous release has it.
      const tables = tableNames({ schema, prefix: 'waypoint_' });
      for (const statement of pgStreamV7Down(tables)) await raw(statement);
      await raw(`DELETE FROM "${schema}".waypoint_migrations WHERE name = 'WaypointStreamBatches1767657600000'`);
      const migrated = await program(schema, 'second');
      assert.equal(migrated.status, 'completed');
      assert.ok(migrated.typeorm > 0, 'an older schema is migrated through TypeORM');
      const recorded = await raw<{ name: string }>(`SELECT name FROM "${schema}".waypoint_migrations ORDER BY id`);
      assert.equal(recorded.at(-1)?.name, 'WaypointStreamBatches1767657600000');
      const batches = await raw<{ found: boolean }>(`SELECT to_regclass('"${schema}".waypoint_stream_batches') IS NOT NULL AS found`);
      assert.equal(batches[0].found, true, 'the undone table is back');
      const third = await program(schema, 'third');
      assert.deepEqual(third.runs, ['first', 'second', 'third']);
      assert.equal(third.typeorm, 0);
    }));

  it("the CLI's read commands on a current schema load no TypeORM module", () =>
    inSchema('cli', async (schema) => {
      await program(schema, 'first');
      const list = await cli(schema, ['runs', 'list']);
      assert.match(list.stdout, /first/);
      assert.equal(list.typeorm, 0, `runs list loaded ${list.typeorm} TypeORM modules`);
      const show = await cli(schema, ['runs', 'show', 'first']);
      assert.match(show.stdout, /go/);
      assert.equal(show.typeorm, 0, `runs show loaded ${show.typeorm} TypeORM modules`);
    }));

  it('store.dataSource loads TypeORM on first use and queries (and opens a transaction on) the same pool', () =>
    inSchema('data source', async (schema) => {
      await program(schema, 'first');
      const report = await program(schema, 'second', 'data-source');
      assert.equal(report.afterRun, 0, 'nothing before store.dataSource was used');
      assert.ok(report.typeorm > 0, 'store.dataSource is TypeORM');
      assert.deepEqual(report.steps, [
        { run_id: 'first', step_name: 'go' },
        { run_id: 'second', step_name: 'go' },
      ]);
    }));

  it('a tiered program (Redis in front) on a current schema loads no TypeORM module either', () =>
    inSchema('tiered', async (schema) => {
      const prefix = `${schema}:tier:`;
      const redis = new Redis(REDIS_URL);
      try {
        await program(schema, 'first');
        const tiered = await program(schema, 'second', 'tiered', prefix);
        assert.equal(tiered.status, 'completed');
        assert.deepEqual(tiered.runs, ['first', 'second'], 'the tiered run reached PostgreSQL');
        assert.equal(tiered.typeorm, 0, `a tiered store on a current schema loaded ${tiered.typeorm} TypeORM modules`);
      } finally {
        const keys = await redis.keys(`${prefix}*`);
        if (keys.length > 0) await redis.del(...keys);
        redis.disconnect();
      }
    }));

  it("a step's transaction on a store opened without TypeORM: the adopted DataSource's manager writes inside it, in the store's schema", () =>
    inSchema('transaction', async (schema) => {
      const open = async () => {
        const store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema });
        await store.init();
        return store;
      };
      await (await open()).close(); // migrates
      const store = await open(); // current: TypeORM comes in with the transaction below
      try {
        await raw(`CREATE TABLE "${schema}".ledger (id text PRIMARY KEY)`);
        const epoch = await leasedRun(store, 'r1');
        const tx = await store.beginTransaction('r1', { epoch });
        await tx.manager.query(`INSERT INTO "${schema}".ledger (id) VALUES ('r1/1')`);
        await tx.appendStep({ step: stepRecord('r1', 1), run: cursorAt(1), fence: { epoch } });
        await tx.commit();
        assert.deepEqual(await raw(`SELECT id FROM "${schema}".ledger`), [{ id: 'r1/1' }]);
        assert.equal((await store.getRun('r1'))!.lastSequence, 1);
        // What TypeORM's connect() would have set, from the store's first query.
        const driver = store.dataSource.driver as unknown as { schema?: string; database?: string; version?: string };
        assert.equal(driver.schema, schema);
        assert.equal(driver.database, 'test');
        assert.match(driver.version ?? '', /^\d+(\.\d+)*$/);
        const [{ now }] = await store.dataSource.query<{ now: number }[]>('SELECT 1 AS now');
        assert.equal(now, 1);
      } finally {
        await store.close();
      }
    }));
});
