import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { resolveOptions } from '../../src/storage/sql/options';
import { STEP_COLUMNS, pinRunToLog, tableNames } from '../../src/storage/sql/sql';
import { pgListRuns, pgRewriteStatements, pgRunList, pgRunRead, pgStatements, pgUpdateRun } from '../../src/storage/sql/sql-postgres';
import { PG_MIGRATION_LOCK_KEY, pgControlFlowV4, pgCreateSchema, pgHotRunsV3, pgLockMigrations, pgSchemaV1 } from '../../src/storage/sql/sql-postgres-schema';
import {
  sqliteControlFlowV4,
  sqliteControlFlowV4Down,
  sqliteStepCursorV5,
  sqliteStepCursorV5Down,
  sqlitePragmas,
  sqliteListRuns,
  sqliteSchemaV1,
  sqliteStatements,
  sqliteUpdateRun,
} from '../../src/storage/sql/sql-sqlite';
import { pgStreamChannel, pgStreamStatements, pgStreamV6, pgStreamV7, sqliteStreamStatements, sqliteStreamV6, sqliteStreamV7 } from '../../src/storage/sql/sql-stream';
import { withCode } from '../helpers/store-records';

const pgTables = tableNames({ schema: 'wp', prefix: 'waypoint_' });
const liteTables = tableNames({ prefix: 'waypoint_' });

/** The $n placeholders a statement uses, sorted and unique. */
function placeholders(text: string): number[] {
  return [...new Set([...text.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])))].sort((a, b) => a - b);
}

describe('sql builders: names', () => {
  it('qualifies and quotes table names by schema and prefix', () => {
    assert.deepEqual(
      [pgTables.runs, pgTables.steps, pgTables.operations, pgTables.migrations, pgTables.schema],
      ['"wp"."waypoint_runs"', '"wp"."waypoint_steps"', '"wp"."waypoint_operations"', 'waypoint_migrations', '"wp"'],
    );
    const plain = tableNames({ prefix: 'app_' });
    assert.deepEqual([plain.runs, plain.migrations, plain.schema], ['"app_runs"', 'app_migrations', null]);
  });

  it('resolves option defaults and refuses identifiers that are not plain', () => {
    const sqlite = resolveOptions({ type: 'sqlite' });
    assert.deepEqual(sqlite, {
      type: 'sqlite',
      path: path.join(process.cwd(), '.waypoint', 'waypoint.db'),
      synchronous: 'FULL',
      busyTimeoutMs: 5000,
      tablePrefix: 'waypoint_',
    });
    assert.deepEqual(resolveOptions({ type: 'postgres', url: 'postgres://x' }), {
      type: 'postgres',
      url: 'postgres://x',
      schema: undefined,
      poolSize: 10,
      groupCommit: { maxInFlight: 2, maxBatch: 64 },
      tablePrefix: 'waypoint_',
    });
    for (const schema of ['a-b', '1abc', 'x"y', 'a b', '']) {
      assert.throws(() => resolveOptions({ type: 'postgres', url: 'postgres://x', schema }), withCode('INVALID_STORE_OPTIONS'), schema);
    }
  });
});

describe('sql builders: postgres', () => {
  const sql = pgStatements(pgTables);

  it('appendStep is one statement: the run row locked FOR SHARE is the fence, the run row is written only when the run does not stay running', () => {
    const payload = STEP_COLUMNS.slice(2);
    assert.equal(
      sql.appendStep,
      `WITH f AS (
  SELECT run_id, status, resume_hint FROM "wp"."waypoint_runs"
  WHERE run_id = $1::text AND lease_epoch = $2::int AND $3::int = COALESCE((SELECT max(s.sequence) FROM "wp"."waypoint_steps" s WHERE s.run_id = $1::text), 0) + 1
  FOR SHARE
),
u AS (
  UPDATE "wp"."waypoint_runs" AS t
  SET status = $6::text, resume_hint = $7::text, last_sequence = $3::int, cursor_agent = $4::int,
      cursor_step = $5::int, updated_at = now()
  FROM f
  WHERE t.run_id = f.run_id AND NOT (f.status = 'running' AND $6::text = 'running' AND f.resume_hint IS NOT DISTINCT FROM $7::text)
)
INSERT INTO "wp"."waypoint_steps" (${STEP_COLUMNS.join(', ')}, cursor_agent, cursor_step)
SELECT f.run_id, $3::int, $8::text, $9::int, $10::text, $11::int, $12::text, $13::text, $14::text, $15::text, $16::text, $17::boolean, $18::timestamptz, $19::timestamptz, $20::int, $21::text, $22::text, $4::int, $5::int
FROM f`,
    );
    assert.equal(payload.length, 15);
    // No statement of the append path rewrites the run row unconditionally.
    for (const name of ['appendStep', 'appendSteady', 'appendSteps', 'appendRun'] as const) assert.match(sql[name], /FOR SHARE/, name);
    // The steady appends (one run, several runs) write no run row at all: they apply only to a run stored
    // running with the append's hint, and what they do not apply goes through appendStep.
    for (const name of ['appendSteady', 'appendSteps'] as const) {
      assert.doesNotMatch(sql[name], /UPDATE/, name);
      assert.match(sql[name], /status = 'running'/, name);
      assert.match(sql[name], /resume_hint IS NOT DISTINCT FROM/, name);
    }
    assert.match(sql.appendSteady, /\$6::text = 'running'/);
    assert.match(sql.appendSteps, /i\.run_status = 'running'/);
  });

  it('numbers every statement’s parameters without gaps (PostgreSQL must type each one)', () => {
    const expected: Record<string, number> = {
      createRun: 6,
      getRun: 1,
      loadRun: 1,
      listSteps: 3,
      appendStep: 22,
      appendSteady: 22,
      appendSteps: 22,
      appendRun: 22,
      acquireLease: 4,
      setLeaseExpiry: 4,
      getOperation: 1,
      beginOperation: 5,
      commitOperation: 4,
      failOperation: 4,
      listOperations: 1,
      insertOperation: 8,
      upsertOperation: 9,
      cancelRun: 2,
      lockRun: 1,
      stepsBefore: 2,
      deleteStepRange: 4,
      upsertStep: 17,
      rewindRun: 3,
      deleteRun: 1,
      leaseEpoch: 1,
    };
    assert.deepEqual(Object.keys(sql).sort(), Object.keys(expected).sort());
    for (const [name, count] of Object.entries(expected)) {
      assert.deepEqual(
        placeholders(sql[name as keyof typeof sql]),
        Array.from({ length: count }, (_, i) => i + 1),
        name,
      );
    }
  });

  it('fences operations with FOR SHARE on the run row, in the writing statement', () => {
    for (const name of ['beginOperation', 'commitOperation', 'failOperation'] as const) {
      assert.match(sql[name], /^WITH f AS \(SELECT .* FROM "wp"\."waypoint_runs" WHERE run_id = \$\d::text AND lease_epoch = \$\d::int FOR SHARE\)/, name);
    }
    assert.match(
      sql.beginOperation,
      /ON CONFLICT \(operation_key\) DO UPDATE SET state = 'started', attempts = o\.attempts \+ 1, updated_at = now\(\)\s+WHERE o\.state <> 'committed'/,
    );
  });

  it('leases use the server clock and bump the epoch only when free, expired or already held', () => {
    assert.match(sql.acquireLease, /lease_epoch = lease_epoch \+ 1, lease_expires_at = now\(\) \+ \$3::float8 \* interval '1 millisecond'/);
    assert.match(sql.acquireLease, /lease_owner IS NULL OR lease_owner = \$2::text OR lease_owner = \$4::text OR lease_expires_at IS NULL OR lease_expires_at <= now\(\)/);
    assert.doesNotMatch(sql.setLeaseExpiry, /lease_epoch =[^=]*\+/, 'renewal and release keep the epoch');
    assert.match(sql.setLeaseExpiry, /lease_expires_at = now\(\) \+ \$4::float8 \* interval '1 millisecond'/);
  });

  it('createRun is insert-if-absent and tells which call created the row', () => {
    assert.match(sql.createRun, /ON CONFLICT \(run_id\) DO NOTHING/);
    assert.match(sql.createRun, /SELECT true AS created, .* FROM ins\s+UNION ALL\s+SELECT false AS created/s);
  });

  it('loadRun reads the run and its ordered steps in one statement', () => {
    assert.match(
      sql.loadRun,
      /^SELECT r\.run_id AS run_run_id, .* NULL AS sha256, NULL AS path\nFROM "wp"\."waypoint_runs" r LEFT JOIN LATERAL .* l ON true WHERE r\.run_id = \$1\nUNION ALL\n/,
    );
    assert.match(sql.loadRun, /FROM "wp"\."waypoint_steps" s WHERE s\.run_id = \$1\nORDER BY sequence NULLS FIRST$/);
  });

  it('updateRun sets only the patched columns, fenced on request', () => {
    // Every run-row write also pins the row to the run's last step (sequence, and cursor unless given).
    const pin = pinRunToLog(pgTables, 'postgres', { cursor: true }).join(', ');
    assert.equal(
      pgUpdateRun(pgTables, ['status', 'resumeHint'], true),
      `UPDATE "wp"."waypoint_runs" AS r SET status = $2, resume_hint = $3, updated_at = now(), ${pin} WHERE r.run_id = $1 AND r.lease_epoch = $4`,
    );
    assert.equal(pgUpdateRun(pgTables, [], false), `UPDATE "wp"."waypoint_runs" AS r SET updated_at = now(), ${pin} WHERE r.run_id = $1`);
    assert.equal(
      pin,
      'last_sequence = GREATEST(r.last_sequence, COALESCE((SELECT max(s.sequence) FROM "wp"."waypoint_steps" s WHERE s.run_id = r.run_id), 0)), ' +
        'cursor_agent = COALESCE((SELECT s.cursor_agent FROM "wp"."waypoint_steps" s WHERE s.run_id = r.run_id AND s.sequence > r.last_sequence ORDER BY s.sequence DESC LIMIT 1), r.cursor_agent), ' +
        'cursor_step = COALESCE((SELECT s.cursor_step FROM "wp"."waypoint_steps" s WHERE s.run_id = r.run_id AND s.sequence > r.last_sequence ORDER BY s.sequence DESC LIMIT 1), r.cursor_step)',
    );
  });

  it('listRuns adds only the filters given, newest first', () => {
    const since = new Date('2025-01-01T00:00:00.000Z');
    assert.deepEqual(pgListRuns(pgTables, { status: ['failed', 'paused'], pipelineName: 'p', since, limit: 5 }), {
      text:
        `SELECT run_id, pipeline_name, pipeline_version, status, cursor_agent, cursor_step, last_sequence, input, metadata, lease_owner, lease_epoch, lease_expires_at, error, resume_hint, created_at, updated_at, parent_run_id FROM (${pgRunList(pgTables)}) x ` +
        'WHERE status = ANY($1::text[]) AND pipeline_name = $2 AND updated_at >= $3 ORDER BY updated_at DESC, run_id LIMIT $4',
      values: [['failed', 'paused'], 'p', since, 5],
    });
    assert.deepEqual(pgListRuns(pgTables, { parentRunId: 'parent', status: 'running', limit: 3 }), {
      text:
        `SELECT run_id, pipeline_name, pipeline_version, status, cursor_agent, cursor_step, last_sequence, input, metadata, lease_owner, lease_epoch, lease_expires_at, error, resume_hint, created_at, updated_at, parent_run_id FROM (${pgRunList(pgTables)}) x ` +
        'WHERE status = ANY($1::text[]) AND parent_run_id = $2 ORDER BY updated_at DESC, run_id LIMIT $3',
      values: [['running'], 'parent', 3],
    });
    const bare = pgListRuns(pgTables, {});
    assert.match(bare.text, /\) x ORDER BY updated_at DESC, run_id$/);
    // The live sequence, cursor and updatedAt come from the last step row (schema V5).
    assert.match(
      pgRunRead(pgTables),
      /LEFT JOIN LATERAL \(SELECT sequence, cursor_agent, cursor_step, completed_at FROM "wp"\."waypoint_steps" WHERE run_id = r\.run_id AND r\.status = 'running' ORDER BY sequence DESC LIMIT 1\) l ON true$/,
    );
    assert.deepEqual(bare.values, []);
    assert.deepEqual(pgListRuns(pgTables, { status: 'running' }).values, [['running']]);
  });

  it('schema v1: text payloads, timestamptz(3), no jsonb, the documented indexes; migrations under an advisory lock', () => {
    const ddl = pgSchemaV1(pgTables).join(';\n');
    assert.doesNotMatch(ddl, /jsonb|json\b/);
    assert.match(ddl, /output text NOT NULL/);
    assert.match(ddl, /started_at timestamptz\(3\) NOT NULL/);
    assert.match(ddl, /PRIMARY KEY \(run_id, sequence\)/);
    assert.match(ddl, /CREATE INDEX "waypoint_runs_status_updated_idx" ON "wp"\."waypoint_runs" \(status, updated_at\)/);
    assert.match(ddl, /CREATE INDEX "waypoint_runs_pipeline_idx" ON "wp"\."waypoint_runs" \(pipeline_name\)/);
    assert.match(ddl, /CREATE INDEX "waypoint_operations_run_idx" ON "wp"\."waypoint_operations" \(run_id\)/);
    assert.equal(pgLockMigrations(), `SELECT pg_advisory_lock(${PG_MIGRATION_LOCK_KEY})`);
    assert.equal(BigInt(PG_MIGRATION_LOCK_KEY), BigInt('0x' + Buffer.from('waypoint').toString('hex')));
    assert.equal(pgCreateSchema('wp'), 'CREATE SCHEMA IF NOT EXISTS "wp"');
  });

  it('payload rewrites: one compare-and-swap per kind of field, set-based for steps and operations, updated_at untouched', () => {
    const rewrite = pgRewriteStatements(pgTables);
    assert.equal(rewrite.swapInput, 'UPDATE "wp"."waypoint_runs" SET input = $3::text WHERE run_id = $1::text AND input = $2::text');
    assert.equal(
      rewrite.swapStepOutputs,
      `UPDATE "wp"."waypoint_steps" s SET output = u.next
FROM unnest($2::int[], $3::text[], $4::text[]) AS u(sequence, prev, next)
WHERE s.run_id = $1::text AND s.sequence = u.sequence AND s.output = u.prev`,
    );
    assert.equal(
      rewrite.swapOperationErrors,
      `UPDATE "wp"."waypoint_operations" o SET error = u.next
FROM unnest($2::text[], $3::text[], $4::text[]) AS u(operation_key, prev, next)
WHERE o.operation_key = u.operation_key AND o.run_id = $1::text AND o.error = u.prev`,
    );
    for (const [name, text] of Object.entries(rewrite)) {
      assert.deepEqual(placeholders(text), name.startsWith('swapInput') || name.startsWith('swapRunError') ? [1, 2, 3] : [1, 2, 3, 4], name);
      assert.doesNotMatch(text, /updated_at|lease_|status|sha256|sequence =[^=]*\+/, name);
    }
  });

  it('schema v3: no index on the columns each append changes, room on the page for a HOT update', () => {
    assert.deepEqual(pgHotRunsV3(pgTables), [
      'DROP INDEX IF EXISTS "wp"."waypoint_runs_status_updated_idx"',
      'CREATE INDEX IF NOT EXISTS "waypoint_runs_status_idx" ON "wp"."waypoint_runs" (status)',
      'ALTER TABLE "wp"."waypoint_runs" SET (fillfactor = 50)',
    ]);
  });

  it('schema v4: nullable path and parent_run_id (no default, so no table rewrite), the parent indexed', () => {
    assert.deepEqual(pgControlFlowV4(pgTables), [
      'ALTER TABLE "wp"."waypoint_steps" ADD COLUMN IF NOT EXISTS path text',
      'ALTER TABLE "wp"."waypoint_runs" ADD COLUMN IF NOT EXISTS parent_run_id text',
      'CREATE INDEX IF NOT EXISTS "waypoint_runs_parent_idx" ON "wp"."waypoint_runs" (parent_run_id)',
    ]);
    // The run-row UPDATE of a transition must not touch an indexed column, or it stops being HOT (V3).
    assert.doesNotMatch(pgStatements(pgTables).appendStep.split('INSERT')[0], /parent_run_id/);
  });
});

describe('sql builders: sqlite', () => {
  it('every fixed statement prepares against schema v1 + v4 + v5 (in memory)', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the optional peer, loaded only for this test (no type package needed)
    const Database = require('better-sqlite3') as new (file: string) => { exec(sql: string): void; prepare(sql: string): unknown; close(): void };
    const db = new Database(':memory:');
    try {
      for (const statement of [...sqliteSchemaV1(liteTables), ...sqliteControlFlowV4(liteTables), ...sqliteStepCursorV5(liteTables)]) db.exec(statement);
      for (const [name, text] of Object.entries(sqliteStatements(liteTables))) assert.doesNotThrow(() => db.prepare(text), name);
      db.prepare(sqliteUpdateRun(liteTables, ['status', 'pipelineVersion', 'cursorAgent', 'cursorStep', 'error', 'resumeHint'], true));
      db.prepare(sqliteListRuns(liteTables, { status: ['failed'], pipelineName: 'p', since: new Date(), parentRunId: 'x', limit: 1 }).text);
      for (const statement of [...sqliteStepCursorV5Down(liteTables), ...sqliteControlFlowV4Down(liteTables)]) db.exec(statement);
    } finally {
      db.close();
    }
  });

  it('the append is one fenced, sequence-checked INSERT of every step column and the cursor; the run row unless the run stays running', () => {
    const sql = sqliteStatements(liteTables);
    assert.equal(
      sql.appendStep,
      `INSERT INTO "waypoint_steps" (${STEP_COLUMNS.join(', ')}, cursor_agent, cursor_step)
SELECT ${STEP_COLUMNS.map((c) => '@' + c).join(', ')}, @cursor_agent, @cursor_step FROM "waypoint_runs"
WHERE run_id = @run_id AND lease_epoch = @epoch AND @sequence = COALESCE((SELECT max(sequence) FROM "waypoint_steps" WHERE run_id = @run_id), 0) + 1`,
    );
    assert.match(sql.transitionRun, /WHERE run_id = @run_id AND NOT \(status = 'running' AND @status = 'running' AND resume_hint IS @resume_hint\)$/);
    // The steady insert is the same with the stored run running with the append's hint: no run-row statement follows it.
    assert.equal(sql.appendSteady, sql.appendStep.replace('lease_epoch = @epoch AND', "lease_epoch = @epoch AND status = 'running' AND resume_hint IS @resume_hint\n  AND"));
  });

  it('payload rewrites compare the whole stored value and leave updated_at alone', () => {
    const sql = sqliteStatements(liteTables);
    assert.equal(sql.swapStepMemory, 'UPDATE "waypoint_steps" SET memory = @to WHERE run_id = @run_id AND sequence = @sequence AND memory = @from');
    assert.equal(sql.swapOperationResult, 'UPDATE "waypoint_operations" SET result = @to WHERE operation_key = @operation_key AND run_id = @run_id AND result = @from');
    for (const name of ['swapInput', 'swapRunError', 'swapStepOutput', 'swapStepMemory', 'swapOperationResult', 'swapOperationError'] as const) {
      assert.match(sql[name], /^UPDATE "waypoint_\w+" SET \w+ = @to WHERE .* AND \w+ = @from$/, name);
      assert.doesNotMatch(sql[name], /updated_at/, name);
    }
  });

  it('updateRun and listRuns build one text per shape, with named parameters', () => {
    assert.equal(
      sqliteUpdateRun(liteTables, ['cursorAgent', 'error'], false),
      // A cursor set on the run row also marks the last step it covers, so it wins over that step's cursor.
      'UPDATE "waypoint_runs" AS r SET cursor_agent = @cursor_agent, error = @error, updated_at = @now, ' +
        'last_sequence = max(r.last_sequence, COALESCE((SELECT max(s.sequence) FROM "waypoint_steps" s WHERE s.run_id = r.run_id), 0)) WHERE r.run_id = @run_id',
    );
    const since = new Date(1_700_000_000_123);
    const built = sqliteListRuns(liteTables, { status: ['running', 'waiting'], since, limit: 3 });
    assert.match(built.text, /WHERE status IN \(@status0, @status1\) AND updated_at >= @since ORDER BY updated_at DESC, run_id LIMIT @limit$/);
    assert.deepEqual(built.params, { status0: 'running', status1: 'waiting', since: 1_700_000_000_123, limit: 3 });
    const children = sqliteListRuns(liteTables, { parentRunId: 'p', pipelineName: 'review' });
    assert.match(children.text, /WHERE pipeline_name = @pipeline_name AND parent_run_id = @parent_run_id ORDER BY updated_at DESC, run_id$/);
    assert.deepEqual(children.params, { pipeline_name: 'review', parent_run_id: 'p' });
  });

  it('schema v1 is STRICT with integer-millisecond times; WAL, the chosen synchronous and busy_timeout', () => {
    const ddl = sqliteSchemaV1(liteTables).join(';\n');
    assert.equal(ddl.match(/\) STRICT/g)?.length, 3);
    assert.match(ddl, /started_at INTEGER NOT NULL/);
    assert.match(ddl, /CREATE INDEX "waypoint_runs_status_updated_idx" ON "waypoint_runs" \(status, updated_at\)/);
    assert.deepEqual(sqlitePragmas({ synchronous: 'FULL', busyTimeoutMs: 5000 }), ['journal_mode = WAL', 'synchronous = FULL', 'busy_timeout = 5000']);
  });
});

describe('sql builders: run streams (V6, V7)', () => {
  it('the append moves the run counter under the fence, inserts one batch row at the reserved offset and notifies, in one statement', () => {
    const sql = pgStreamStatements(pgTables);
    assert.deepEqual(placeholders(sql.append), [1, 2, 3, 4, 5]);
    assert.match(sql.append, /^WITH head AS \(\n {2}UPDATE "wp"\."waypoint_runs" SET stream_length = stream_length \+ \$4::int/);
    assert.match(sql.append, /WHERE run_id = \$1::text AND \(\$2::int IS NULL OR lease_epoch = \$2::int\)/);
    assert.match(
      sql.append,
      /INSERT INTO "wp"\."waypoint_stream_batches" \(run_id, "offset", count, body, created_at\) SELECT \$1::text, head\.first, \$4::int, \$5::text, now\(\) FROM head/,
    );
    assert.doesNotMatch(sql.append, /waypoint_events/, 'appends no longer write V6 rows');
    assert.match(sql.append, /SELECT pg_notify\(\$3::text, \$1::text\) FROM head/);
    // The read: V6 rows in the offset range, and the batches from the one holding $2, both bounded by $2 + $3.
    assert.match(sql.read, /FROM "wp"\."waypoint_events"\n {2}WHERE run_id = \$1::text AND "offset" >= \$2::int AND "offset" < \$2::int \+ \$3::int\)/);
    assert.match(sql.read, /SELECT max\("offset"\) FROM "wp"\."waypoint_stream_batches" WHERE run_id = \$1::text AND "offset" <= \$2::int/);
    assert.match(sql.drop, /DELETE FROM "wp"\."waypoint_events"[\s\S]*DELETE FROM "wp"\."waypoint_stream_batches"/);
    assert.equal(sql.listen('waypoint_stream_ab'), 'LISTEN "waypoint_stream_ab"');
  });

  it('one notification channel per events table, a valid identifier', () => {
    const channel = pgStreamChannel(pgTables);
    assert.match(channel, /^waypoint_stream_[0-9a-f]{16}$/);
    assert.equal(pgStreamChannel(tableNames({ schema: 'wp', prefix: 'waypoint_' })), channel, 'stable');
    assert.notEqual(pgStreamChannel(tableNames({ schema: 'other', prefix: 'waypoint_' })), channel);
    assert.notEqual(pgStreamChannel(tableNames({ schema: 'wp', prefix: 'app_' })), channel);
  });

  it('the migration is additive: a new table (STRICT on SQLite) and a counter with a default', () => {
    const [pgTable, pgCounter] = pgStreamV6(pgTables);
    assert.match(pgTable, /^CREATE TABLE IF NOT EXISTS "wp"\."waypoint_events" \(/);
    assert.match(pgTable, /PRIMARY KEY \(run_id, "offset"\)/);
    assert.equal(pgCounter, 'ALTER TABLE "wp"."waypoint_runs" ADD COLUMN IF NOT EXISTS stream_length integer NOT NULL DEFAULT 0');
    const [liteTable, liteCounter] = sqliteStreamV6(liteTables);
    assert.match(liteTable, /\) WITHOUT ROWID, STRICT$/);
    assert.equal(liteCounter, 'ALTER TABLE "waypoint_runs" ADD COLUMN stream_length INTEGER NOT NULL DEFAULT 0');
    const lite = sqliteStreamStatements(liteTables);
    assert.match(lite.reserve, /WHERE run_id = @run_id AND \(@epoch IS NULL OR lease_epoch = @epoch\)\nRETURNING stream_length - @count AS first$/);
  });

  it('V7 is additive: a new batches table keyed (run_id, first offset); the V6 table stays', () => {
    const pg = pgStreamV7(pgTables);
    assert.equal(pg.length, 1);
    assert.match(pg[0], /^CREATE TABLE IF NOT EXISTS "wp"\."waypoint_stream_batches" \(/);
    assert.match(pg[0], /count integer NOT NULL CHECK \(count > 0\)/);
    assert.match(pg[0], /PRIMARY KEY \(run_id, "offset"\)/);
    const lite = sqliteStreamV7(liteTables);
    assert.equal(lite.length, 1);
    assert.match(lite[0], /^CREATE TABLE IF NOT EXISTS "waypoint_stream_batches" \([\s\S]*\) STRICT$/);
  });
});
