import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdirSync, symlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { Agent, Pipeline, Step, Waypoint, type CheckpointStore } from '../../src/index';
import { TOKENS } from '../../src/contract/tokens';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { MemoryLogger } from './backends';

// Two Waypoint instances in ONE process over the same database, each with its own store object (two
// containers in one server, two apps in one process). While A is inside step 2 of a run, B must not take
// the run over: B is refused with RUN_LOCKED, or waits with waitForLockMs and resumes once A lets go.
// Fails before the fix (src/core/lease/run-lease.ts holderIsDead took a holder id with our own pid for a dead
// earlier process; the in-process guard in run-driver.ts was per store object): B took the lease over,
// step 2 ran twice and A failed with LEASE_LOST.

const executions: Record<string, number> = {};
let entered: () => void = () => undefined;
let release: () => void = () => undefined;

class Worker extends Agent {
  @Step()
  first() {
    executions.first = (executions.first ?? 0) + 1;
    return { first: true };
  }

  @Step()
  async second() {
    executions.second = (executions.second ?? 0) + 1;
    // Only the first execution waits at the latch: a second one (the bug) must not hang the test.
    if (executions.second > 1) return { second: true };
    entered();
    await new Promise<void>((resolve) => (release = resolve));
    return { second: true };
  }

  @Step()
  third() {
    executions.third = (executions.third ?? 0) + 1;
    return { third: true };
  }
}

@Pipeline({ name: 'in-process-executors', version: '1.0.0', agents: [Worker] })
class TwoInstances {}

interface Backend {
  label: string;
  /** The two store objects name the database differently, so only the lease itself can keep B out. */
  aliased?: boolean;
  /** A new store object on the test's database (each call: a new object, same data). */
  make(testName: string): Promise<{ open: () => CheckpointStore; dispose: () => Promise<void> }>;
}

const backends: Backend[] = [
  {
    label: 'SQLite (one file, two store objects)',
    make: () => {
      const { file, remove } = tempSqlitePath();
      return Promise.resolve({ open: () => new TypeOrmCheckpointStore({ type: 'sqlite', path: file }), dispose: () => Promise.resolve(remove()) });
    },
  },
  {
    label: 'PostgreSQL (one schema, two store objects)',
    make: async (testName) => {
      const schema = schemaFor(`in-process executors: ${testName}`);
      await dropSchema(schema);
      return { open: () => new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 2 }), dispose: () => dropSchema(schema) };
    },
  },
  {
    label: 'SQLite (one file reached through a symlink: two locations)',
    aliased: true,
    make: () => {
      const { file, remove } = tempSqlitePath();
      mkdirSync(dirname(file), { recursive: true });
      const alias = join(dirname(dirname(file)), 'alias');
      symlinkSync(dirname(file), alias);
      let opened = 0;
      const open = () => new TypeOrmCheckpointStore({ type: 'sqlite', path: opened++ === 0 ? file : join(alias, basename(file)) });
      return Promise.resolve({ open, dispose: () => Promise.resolve(remove()) });
    },
  },
  {
    label: 'PostgreSQL (one schema as 127.0.0.1 and as localhost: two locations)',
    aliased: true,
    make: async (testName) => {
      const schema = schemaFor(`in-process executors: ${testName}`);
      await dropSchema(schema);
      let opened = 0;
      const url = () => (opened++ === 0 ? PG_TEST_URL : PG_TEST_URL.replace('127.0.0.1', 'localhost'));
      return { open: () => new TypeOrmCheckpointStore({ type: 'postgres', url: url(), schema, poolSize: 2 }), dispose: () => dropSchema(schema) };
    },
  },
];

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  for (const key of Object.keys(executions)) delete executions[key];
});

function modules(store: CheckpointStore): ContainerModule[] {
  return [
    new ContainerModule(({ bind }) => {
      bind(TOKENS.CheckpointStore).toConstantValue(store);
      bind(TOKENS.Logger).toConstantValue(new MemoryLogger());
    }),
  ];
}

async function twoInstances(backend: Backend, testName: string, workerIds: [string | undefined, string | undefined]) {
  const db = await backend.make(`${backend.label}: ${testName}`);
  // A long TTL: a lease that expired during the test would let B in for the wrong reason.
  const create = (workerId: string | undefined) => Waypoint.create({ modules: modules(db.open()), leaseTtlMs: 10_000, ...(workerId ? { workerId } : {}) });
  const a = await create(workerIds[0]);
  const b = await create(workerIds[1]);
  cleanups.push(async () => {
    release();
    await a.close().catch(() => undefined);
    await b.close().catch(() => undefined);
    await db.dispose();
  });
  const inSecond = new Promise<void>((resolve) => (entered = resolve));
  return { a, b, inSecond };
}

/** A holds run X inside step 2; B is refused, then waits; A pauses after step 2 and B resumes step 3. */
async function refusedThenResumed(a: Waypoint, b: Waypoint, inSecond: Promise<void>, holder: string | null): Promise<void> {
  const stopA = new AbortController();
  const runA = a.run(TwoInstances, { runId: 'x', input: {}, signal: stopA.signal });
  await Promise.race([inSecond, runA.then((r) => assert.fail(`A ended (${r.status}) before it entered step 2`))]);

  await assert.rejects(b.run(TwoInstances, { runId: 'x' }), (error: { code?: string; owner?: string }) => {
    assert.equal(error.code, 'RUN_LOCKED', 'B is refused while A holds the run');
    if (holder !== null) assert.equal(error.owner, holder, 'RUN_LOCKED names the holder');
    return true;
  });
  await assert.rejects(b.resume('x'), (error: { code?: string }) => error.code === 'RUN_LOCKED');

  const waiting = b.run(TwoInstances, { runId: 'x', waitForLockMs: 20_000 });
  await new Promise((resolve) => setTimeout(resolve, 150)); // B is polling for the run meanwhile
  assert.equal(executions.second, 1, 'B did not start step 2 while A is in it');
  stopA.abort('test: A pauses after step 2');
  release();

  const resultA = await runA;
  assert.deepEqual([resultA.status, resultA.lastSequence], ['paused', 2], 'A paused cleanly, it did not lose its lease');
  const resultB = await waiting;
  assert.deepEqual([resultB.status, resultB.stepsSkipped, resultB.stepsExecuted, resultB.lastSequence], ['completed', 2, 1, 3], 'B resumed after A');
  assert.deepEqual(executions, { first: 1, second: 1, third: 1 }, 'every step executed exactly once');
  assert.deepEqual(resultB.state, { first: true, second: true, third: true });
}

for (const backend of backends) {
  describe(`two Waypoint instances in one process on ${backend.label}`, () => {
    if (backend.aliased) {
      // The in-process guard cannot match the two locations: the lease must hold on its own, which it
      // does for distinct ids (an id live in this process is never judged dead). With one custom id on
      // both, the store hands the owner its own lease again: see the README's note on worker ids.
      it('default worker ids: the lease alone refuses B, and B resumes after A', async () => {
        const { a, b, inSecond } = await twoInstances(backend, 'aliased, default ids', [undefined, undefined]);
        assert.notEqual(a.store.location, b.store.location, 'the guard cannot see that they share a database');
        await refusedThenResumed(a, b, inSecond, null);
      });
      return;
    }
    it('default worker ids: B gets RUN_LOCKED while A is inside step 2, and with waitForLockMs resumes after A', async () => {
      const { a, b, inSecond } = await twoInstances(backend, 'default ids', [undefined, undefined]);
      await refusedThenResumed(a, b, inSecond, null);
    });

    it('the same custom workerId on both instances: B is still refused and waits', async () => {
      const { a, b, inSecond } = await twoInstances(backend, 'same custom id', ['api-server', 'api-server']);
      await refusedThenResumed(a, b, inSecond, 'api-server');
    });

    it('different custom worker ids: B is refused with A named as the holder', async () => {
      const { a, b, inSecond } = await twoInstances(backend, 'distinct custom ids', ['app-a', 'app-b']);
      await refusedThenResumed(a, b, inSecond, 'app-a');
    });
  });
}
