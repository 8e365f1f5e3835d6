import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { ConnectionGate } from '../../src/storage/sql/connection-gate';
import { tableNames } from '../../src/storage/sql/sql';
import { pgTransactionStatements } from '../../src/storage/sql/sql-postgres';
import { sqliteSchemaV1, sqliteStatements } from '../../src/storage/sql/sql-sqlite';
import { SAVEPOINT_SQL } from '../../src/storage/sql/transaction-runner';
import BetterSqlite3 from 'better-sqlite3';

// The pure pieces under the stores' transactions: their SQL text, and the gate that keeps SQLite's one
// connection to one transaction at a time.

interface Row {
  state: string;
  result: string | null;
  error: string | null;
  attempts: number;
}

describe('transaction SQL', () => {
  it('PostgreSQL recordOperation: $1..$7, inserts attempt 1 or bumps attempts, never over a committed record', () => {
    const sql = pgTransactionStatements(tableNames({ schema: 'wp', prefix: 'waypoint_' })).recordOperation;
    const used = [...new Set([...sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])))].sort((a, b) => a - b);
    assert.deepEqual(used, [1, 2, 3, 4, 5, 6, 7]);
    assert.match(sql, /^INSERT INTO "wp"\."waypoint_operations" AS o /);
    assert.match(sql, /ON CONFLICT \(operation_key\) DO UPDATE SET state = EXCLUDED\.state, result = EXCLUDED\.result, error = EXCLUDED\.error,\s+attempts = o\.attempts \+ 1/);
    assert.match(sql, /WHERE o\.state <> 'committed'\nRETURNING /);
    assert.doesNotMatch(sql, /lease_epoch/, 'unfenced: the transaction is fenced by its append');
  });

  it('SQLite recordOperation behaves on schema v1: attempt 1, then attempts + 1; a committed record is left as is', () => {
    // better-sqlite3 ships no types; this is the slice used here.
    const Database = BetterSqlite3 as new (file: string) => {
      exec(sql: string): void;
      prepare(sql: string): { get(params: object): Row | undefined };
      close(): void;
    };
    const db = new Database(':memory:');
    const tables = tableNames({ prefix: 'waypoint_' });
    try {
      for (const statement of sqliteSchemaV1(tables)) db.exec(statement);
      const record = db.prepare(sqliteStatements(tables).recordOperation);
      const at = (state: string, result: string | null, error: string | null) =>
        record.get({ operation_key: 'k', run_id: 'r', step_key: 'a/s', name: 'book', state, result, error, now: 1 });
      assert.deepEqual(pick(at('failed', null, '{"message":"boom"}')), { state: 'failed', result: null, error: '{"message":"boom"}', attempts: 1 });
      assert.deepEqual(pick(at('committed', '{"ok":true}', null)), { state: 'committed', result: '{"ok":true}', error: null, attempts: 2 });
      assert.equal(at('failed', null, '{"late":true}'), undefined, 'a committed operation is never rewritten');
    } finally {
      db.close();
    }
  });

  it('savepoint statements: one name; a rollback to it also releases it', () => {
    assert.equal(SAVEPOINT_SQL.set, 'SAVEPOINT waypoint_effect');
    assert.equal(SAVEPOINT_SQL.release, 'RELEASE SAVEPOINT waypoint_effect');
    assert.equal(SAVEPOINT_SQL.rollback, 'ROLLBACK TO SAVEPOINT waypoint_effect; RELEASE SAVEPOINT waypoint_effect');
  });
});

describe('ConnectionGate (SQLite: one transaction on the connection at a time)', () => {
  it('is free until acquired; busy until every holder and waiter is done; holders in arrival order', async () => {
    const gate = new ConnectionGate();
    assert.equal(gate.busy, null);
    const order: string[] = [];
    const releaseA = await gate.acquire();
    const busy = gate.busy as Promise<void> | null; // (the assert above narrowed the getter to null)
    assert.ok(busy);
    let idle = false;
    void busy.then(() => (idle = true));
    const b = gate.acquire().then((release) => (order.push('b'), release));
    const c = gate.acquire().then((release) => (order.push('c'), release));
    await tick();
    assert.deepEqual(order, [], 'waiters wait for the holder');
    releaseA();
    releaseA(); // idempotent: does not hand the gate over twice
    const releaseB = await b;
    await tick();
    assert.deepEqual(order, ['b'], 'one holder at a time');
    assert.equal(idle, false, 'still busy while a waiter holds it');
    releaseB();
    const releaseC = await c;
    assert.deepEqual(order, ['b', 'c']);
    assert.equal(gate.busy, busy, 'one busy period across the handovers');
    releaseC();
    await tick();
    assert.equal(idle, true);
    assert.equal(gate.busy, null);
  });
});

function pick(row: Row | undefined): Row | undefined {
  return row && { state: row.state, result: row.result, error: row.error, attempts: row.attempts };
}
