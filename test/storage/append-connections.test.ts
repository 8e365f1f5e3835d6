import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { Pool } from 'pg';
import { AppendConnections } from '../../src/storage/sql/append-connections';
import { PG_TEST_URL } from '../helpers/pg-schema';

const PID = { name: 'append_connections_pid', text: 'SELECT pg_backend_pid() AS pid' };

async function pid(appends: AppendConnections): Promise<number> {
  return (await appends.query<{ pid: number }>(PID)).rows[0].pid;
}

/** Waits (no time limit but the test's) until `check` holds. */
async function until(check: () => boolean): Promise<void> {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
}

describe('AppendConnections (the connections PostgreSQL appends run on)', { timeout: 60_000 }, () => {
  const pools: Pool[] = [];
  const pool = (max: number) => {
    const p = new Pool({ connectionString: PG_TEST_URL, max });
    pools.push(p);
    return p;
  };
  after(async () => {
    for (const p of pools.splice(0)) await p.end();
  });

  it('keeps its connection checked out between appends and runs the next append on it', async () => {
    const p = pool(3);
    const appends = new AppendConnections(p, 1, 60_000);
    const first = await pid(appends);
    assert.equal(appends.kept, 1);
    assert.equal(p.idleCount, 0, 'not handed back to the pool');
    assert.equal(await pid(appends), first, 'same connection');
    assert.equal(p.totalCount, 1);
    appends.close();
    assert.equal(appends.kept, 0);
    assert.equal(p.idleCount, 1, 'close hands it back');
  });

  it('hands the connection back at once when something waits for one in the pool', async () => {
    const p = pool(1);
    const appends = new AppendConnections(p, 1, 60_000);
    await pid(appends);
    assert.equal(appends.kept, 1);
    // The pool's only connection is kept: this waits, and the next append's end hands it over.
    const waiting = p.query<{ two: number }>('SELECT 2 AS two');
    assert.equal(p.waitingCount, 1);
    // A kept connection is taken by the next append without the pool (the waiter stays queued until it ends).
    await pid(appends);
    assert.equal(appends.kept, 0, 'given to the waiter instead of kept');
    assert.equal((await waiting).rows[0].two, 2);
    appends.close();
  });

  it('hands a kept connection back after idleMs without an append', async () => {
    const p = pool(1);
    const appends = new AppendConnections(p, 1, 20);
    await pid(appends);
    assert.equal(appends.kept, 1);
    // Nothing appends again: the idle timer gives the connection to this waiter.
    assert.equal((await p.query<{ three: number }>('SELECT 3 AS three')).rows[0].three, 3);
    assert.equal(appends.kept, 0);
    appends.close();
  });

  it('keeps no more than `keep`; with keep 0 every append goes through the pool', async () => {
    const p = pool(4);
    const two = new AppendConnections(p, 2, 60_000);
    await Promise.all([pid(two), pid(two), pid(two)]);
    assert.equal(two.kept, 2, 'three at once, two kept');
    two.close();
    const none = new AppendConnections(p, 0, 60_000);
    await pid(none);
    assert.equal(none.kept, 0);
    assert.equal(p.totalCount - p.idleCount, 0, 'nothing checked out');
    none.close();
  });

  it('a failed statement closes its connection (as pool.query does); the next append opens another', async () => {
    const p = pool(2);
    const appends = new AppendConnections(p, 1, 60_000);
    const first = await pid(appends);
    await assert.rejects(appends.query({ text: 'SELECT 1 / 0' }), /division by zero/);
    assert.equal(appends.kept, 0);
    await until(() => p.totalCount === 0);
    assert.notEqual(await pid(appends), first);
    appends.close();
  });

  it('a kept connection that fails while idle is closed, with no unhandled error', async () => {
    const p = pool(2);
    const appends = new AppendConnections(p, 1, 60_000);
    const victim = await pid(appends);
    assert.equal(appends.kept, 1);
    const other = pool(1);
    await other.query('SELECT pg_terminate_backend($1)', [victim]);
    await until(() => appends.kept === 0);
    assert.notEqual(await pid(appends), victim);
    appends.close();
  });
});
