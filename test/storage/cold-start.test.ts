import { strict as assert } from 'node:assert';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { sqliteStreamV6Down } from '../../src/storage/sql/sql-stream';
import { tableNames } from '../../src/storage/sql/sql';
import { openRawSqlite } from '../helpers/raw-sqlite';
import { spawnNode } from '../helpers/child-process';
import { tempSqlitePath } from '../helpers/sqlite-temp';

const CHILD = resolve(__dirname, 'cold-start-child.js');
const REPORT = resolve(__dirname, 'cold-start-report.js');
const CLI = resolve(__dirname, '../../src/cli/main.js');

/** Runs the CLI on `file` with `args`: its output and the TypeORM modules it loaded. */
async function cli(file: string, args: string[]): Promise<{ stdout: string; typeorm: number }> {
  const exit = await spawnNode(CLI, ['--store', `sqlite:${file}`, ...args], { NODE_OPTIONS: `--require ${REPORT}` }).exited;
  assert.equal(exit.code, 0, `waypoint-durable ${args.join(' ')} failed: ${exit.stderr}`);
  const last = exit.stderr.trim().split('\n').at(-1) ?? '{}';
  return { stdout: exit.stdout, typeorm: (JSON.parse(last) as { typeormModules: number }).typeormModules };
}

interface ChildReport {
  status: string;
  runs: string[];
  steps?: { run_id: string; step_name: string }[];
  /** TypeORM modules in require.cache once the run was closed, and at the end. */
  afterRun: number;
  typeorm: number;
}

async function program(file: string, runId: string, mode?: string): Promise<ChildReport> {
  const exit = await spawnNode(CHILD, [file, runId, ...(mode ? [mode] : [])]).exited;
  assert.equal(exit.code, 0, `the child failed: ${exit.stderr}`);
  return JSON.parse(exit.lines.at(-1)!) as ChildReport;
}

// Issue 40: a SQLite program whose schema is current loads no TypeORM module; TypeORM comes in only to
// migrate and for what needs it (store.dataSource, transactional side effects).
describe('cold start without TypeORM (SQLite)', () => {
  it('a program on a current schema runs and reads back without loading any TypeORM module', async () => {
    const { file, remove } = tempSqlitePath();
    try {
      // A new file: the first program migrates, through TypeORM (this also shows the count sees TypeORM).
      const first = await program(file, 'first');
      assert.equal(first.status, 'completed');
      assert.ok(first.typeorm > 0, 'migrating a new file loads TypeORM');
      const second = await program(file, 'second');
      assert.equal(second.status, 'completed');
      assert.deepEqual(second.runs, ['first', 'second']);
      assert.equal(second.typeorm, 0, `a current schema loaded ${second.typeorm} TypeORM modules`);
    } finally {
      remove();
    }
  });

  it('an older schema (a migration not yet recorded) is migrated through TypeORM, then the next start skips it', async () => {
    const { file, remove } = tempSqlitePath();
    try {
      await program(file, 'first');
      // Undo the last migration (V6, run streams) by hand, as a database of the previous release has it.
      const db = openRawSqlite(file);
      for (const statement of sqliteStreamV6Down(tableNames({ prefix: 'waypoint_' }))) db.exec(statement);
      db.prepare(`DELETE FROM waypoint_migrations WHERE name = 'WaypointRunStreams1767571200000'`).run();
      db.close();
      const migrated = await program(file, 'second');
      assert.equal(migrated.status, 'completed');
      assert.ok(migrated.typeorm > 0, 'an older schema is migrated through TypeORM');
      const names = openRawSqlite(file);
      const recorded = names.prepare('SELECT name FROM waypoint_migrations ORDER BY id').all();
      names.close();
      assert.equal(recorded.at(-1)?.name, 'WaypointRunStreams1767571200000');
      const third = await program(file, 'third');
      assert.deepEqual(third.runs, ['first', 'second', 'third']);
      assert.equal(third.typeorm, 0);
    } finally {
      remove();
    }
  });

  it("the CLI's read commands on a current schema load no TypeORM module", async () => {
    const { file, remove } = tempSqlitePath();
    try {
      await program(file, 'first');
      const list = await cli(file, ['runs', 'list']);
      assert.match(list.stdout, /first/);
      assert.equal(list.typeorm, 0, `runs list loaded ${list.typeorm} TypeORM modules`);
      const show = await cli(file, ['runs', 'show', 'first']);
      assert.match(show.stdout, /go/);
      assert.equal(show.typeorm, 0, `runs show loaded ${show.typeorm} TypeORM modules`);
    } finally {
      remove();
    }
  });

  it('store.dataSource loads TypeORM on first use and queries the same connection', async () => {
    const { file, remove } = tempSqlitePath();
    try {
      await program(file, 'first');
      const report = await program(file, 'second', 'data-source');
      assert.equal(report.afterRun, 0, 'nothing before store.dataSource was used');
      assert.ok(report.typeorm > 0, 'store.dataSource is TypeORM');
      assert.deepEqual(report.steps, [
        { run_id: 'first', step_name: 'go' },
        { run_id: 'second', step_name: 'go' },
      ]);
    } finally {
      remove();
    }
  });
});
