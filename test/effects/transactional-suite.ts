import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { randomBytes } from 'node:crypto';
import { ContainerModule } from 'inversify';
import {
  StepFailedError,
  TOKENS,
  Waypoint,
  WaypointError,
  currentTransaction,
  operationKey,
  type CheckpointStore,
  type OperationRecord,
  type StoreEntities,
} from '../../src/index';
import { balance, book, ledgerRows, type LedgerDb } from './ledger';
import { Bookkeeping, Entities, Hasty, LedgerEntry, Mixed, Plain, Tallying, effectsModule, knobs, resetKnobs, type Booking } from './transactional-fixtures';

/** One isolated database (a SQLite file or a PostgreSQL schema) for one test. */
export interface EffectsDb {
  ledger: LedgerDb;
  storage(): ContainerModule;
  /** Another store on the same database, as another worker would have. */
  sibling(): Promise<CheckpointStore>;
  /** A store on the same database with these TypeORM entities registered. */
  storeWithEntities(entities: StoreEntities): CheckpointStore;
  dispose(): Promise<void>;
}

export interface EffectsBackend {
  name: string;
  dialect: 'sqlite' | 'postgres';
  open(testName: string): Promise<EffectsDb>;
}

interface Bench {
  db: EffectsDb;
  ledger: LedgerDb;
  waypoint: Waypoint;
  ops: (runId: string, name?: string) => Promise<OperationRecord[]>;
}

const key = (runId: string, n: number) => operationKey(runId, 'Bookkeeper', 'record', 'book', n);

/**
 * Transactional side effects against a real database, written once and run on SQLite and PostgreSQL
 * (test/effects/transactional-<backend>.test.ts): the effect's rows, its operation record and the step's
 * checkpoint commit together or not at all.
 */
export function defineTransactionalSuite(backend: EffectsBackend): void {
  describe(`transactional side effects on ${backend.name}`, { timeout: 60_000 }, () => {
    beforeEach(resetKnobs);

    async function withBench(name: string, fn: (bench: Bench) => Promise<void>, entities?: StoreEntities): Promise<void> {
      const db = await backend.open(`effects ${backend.name}: ${name}`);
      const storage = entities ? new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(db.storeWithEntities(entities))) : db.storage();
      const waypoint = await Waypoint.create({ modules: [effectsModule(db.ledger), storage], workerId: 'worker-one' });
      const ops = async (runId: string, opName = 'book') => (await waypoint.store.listOperations(runId)).filter((o) => o.name === opName);
      try {
        await fn({ db, ledger: db.ledger, waypoint, ops });
      } finally {
        await waypoint.close();
        await db.dispose();
      }
    }

    it('works under encryption at rest: the rows commit once, the operation results and checkpoints are sealed', async () => {
      const db = await backend.open(`effects ${backend.name}: encrypted`);
      const encryption = { keys: { k1: randomBytes(32) }, activeKeyId: 'k1' };
      const waypoint = await Waypoint.create({ modules: [effectsModule(db.ledger), db.storage()], workerId: 'worker-one', encryption });
      try {
        const result = await waypoint.run(Bookkeeping, { runId: 'sealed', input: {} });
        assert.equal(result.status, 'completed');
        assert.equal(await balance(db.ledger), 15);
        const inner = (waypoint.store as unknown as { inner: CheckpointStore }).inner;
        const raw = (await inner.listOperations('sealed')).filter((o) => o.name === 'book');
        assert.equal(raw.length, 2);
        assert.ok(
          raw.every((o) => o.state === 'committed' && o.result?.startsWith('wpenc:1:k1:')),
          'operation results sealed',
        );
        assert.ok(
          (await inner.listSteps('sealed')).every((row) => row.output.startsWith('wpenc:1:k1:')),
          'checkpoints sealed',
        );
        const opened = (await waypoint.store.listOperations('sealed')).filter((o) => o.name === 'book');
        assert.deepEqual(opened.map((o) => (JSON.parse(o.result!) as Booking).item).sort(), ['apples', 'pears']);
      } finally {
        await waypoint.close();
        await db.dispose();
      }
    });

    it('commits the rows, the operation records and the checkpoint together, once', () =>
      withBench('once', async ({ ledger, waypoint, ops }) => {
        const result = await waypoint.run<{ booked: Booking[] }>(Bookkeeping, { runId: 'once', input: {} });
        assert.equal(result.status, 'completed');
        assert.deepEqual(await ledgerRows(ledger, 'once'), [
          { run_id: 'once', op_key: key('once', 1), item: 'apples', amount: 10 },
          { run_id: 'once', op_key: key('once', 2), item: 'pears', amount: 5 },
        ]);
        assert.equal(await balance(ledger), 15);
        assert.deepEqual(
          result.state.booked.map((b) => b.key),
          [key('once', 1), key('once', 2)],
        );
        const records = await ops('once');
        assert.deepEqual(
          records.map((o) => [o.operationKey, o.state, o.attempts, o.stepKey]).sort(),
          [
            [key('once', 1), 'committed', 1, 'Bookkeeper/record'],
            [key('once', 2), 'committed', 1, 'Bookkeeper/record'],
          ].sort(),
        );
        const [row] = await waypoint.store.listSteps('once');
        assert.equal(row.sideEffectsCommitted, true);

        await waypoint.run(Bookkeeping, { runId: 'once', input: {} });
        assert.equal(knobs.calls, 2, 'a completed run runs nothing again');
        assert.equal((await ledgerRows(ledger, 'once')).length, 2);
      }));

    it('a step attempt failing after its effects rolls them back; the retry applies them once', () =>
      withBench('step-retry', async ({ ledger, waypoint, ops }) => {
        let seenInside: unknown[] | undefined;
        knobs.afterEffects = async (ctx) => {
          if (ctx.attempt > 1) return;
          seenInside = await ledgerRows(ledger, 'retry'); // another connection: sees nothing uncommitted
          throw new Error('transient failure after the effects');
        };
        const result = await waypoint.run(Bookkeeping, { runId: 'retry', input: {} });
        assert.equal(result.status, 'completed');
        assert.deepEqual(seenInside, []);
        assert.equal(knobs.calls, 4, 'both effects ran in each attempt');
        assert.deepEqual(
          (await ledgerRows(ledger, 'retry')).map((r) => r.item),
          ['apples', 'pears'],
          'applied once',
        );
        assert.equal(await balance(ledger), 15);
        assert.ok(
          (await ops('retry')).every((o) => o.state === 'committed' && o.attempts === 1),
          'the rolled-back attempt left no record',
        );
        assert.equal((await waypoint.store.listSteps('retry'))[0].attempt, 2);
      }));

    it('an effect that throws is undone to its savepoint, recorded failed with its error, retried, never committed', () =>
      withBench('effect-throws', async ({ ledger, waypoint, ops }) => {
        knobs.insideEffect = () => {
          throw new Error('ledger locked');
        };
        await assert.rejects(waypoint.run(Bookkeeping, { runId: 'fails', input: {} }), (err: unknown) => {
          assert.ok(err instanceof StepFailedError, String(err));
          assert.equal(err.attempts, 2);
          const cause = err.cause as WaypointError & { operationKey: string };
          assert.equal(cause.code, 'SIDE_EFFECT_FAILED');
          assert.equal(cause.operationKey, key('fails', 1));
          assert.match(
            cause.message,
            /^Side effect 'book' in step 'Bookkeeper\/record' of run 'fails' failed: ledger locked\. It was not marked committed, so the step's next attempt \(a retry, or waypoint\.resume\('fails'\)\) runs it again\. Fix the cause first\.$/,
          );
          return true;
        });
        assert.deepEqual(await ledgerRows(ledger, 'fails'), []);
        assert.equal(await balance(ledger), 0);
        const [record, ...others] = await ops('fails');
        assert.equal(others.length, 0, 'the second effect never started');
        assert.equal(record.state, 'failed');
        assert.equal(record.result, null);
        assert.match(record.error ?? '', /ledger locked/);
        assert.equal(record.attempts, 4, '2 effect attempts in each of 2 step attempts');

        knobs.insideEffect = undefined;
        const resumed = await waypoint.resume('fails');
        assert.equal(resumed.status, 'completed');
        assert.equal((await ledgerRows(ledger, 'fails')).length, 2);
        assert.deepEqual(
          (await ops('fails')).map((o) => o.state),
          ['committed', 'committed'],
        );
      }));

    it("an effect that fails once commits on its own retry; the failed attempt's writes are undone", () =>
      withBench('effect-retry', async ({ ledger, waypoint, ops }) => {
        knobs.insideEffect = (_op, call) => {
          if (call === 1) throw new Error('deadlock detected');
        };
        const result = await waypoint.run<{ booked: Booking[] }>(Bookkeeping, { runId: 'effect-retry', input: {} });
        assert.equal(result.status, 'completed');
        assert.deepEqual(
          (await ledgerRows(ledger, 'effect-retry')).map((r) => r.item),
          ['apples', 'pears'],
        );
        const first = (await ops('effect-retry')).find((o) => o.operationKey === key('effect-retry', 1))!;
        assert.deepEqual([first.state, first.attempts, first.error], ['committed', 2, null]);
        assert.equal((await waypoint.store.listSteps('effect-retry'))[0].attempt, 1, 'the step itself did not retry');
      }));

    it('a result that cannot be serialized fails the step before anything is committed', () =>
      withBench('unserializable', async ({ ledger, waypoint, ops }) => {
        knobs.insideEffect = () => ({ callback: () => 1 });
        await assert.rejects(waypoint.run(Bookkeeping, { runId: 'unserializable', input: {} }), (err: WaypointError) => {
          assert.equal(err.code, 'UNSERIALIZABLE_VALUE');
          assert.match(err.message, /side effect 'book'/);
          return true;
        });
        assert.deepEqual(await ledgerRows(ledger, 'unserializable'), []);
        assert.ok((await ops('unserializable')).every((o) => o.state !== 'committed'));
        assert.equal((await waypoint.get('unserializable'))?.lastSequence, 0);
      }));

    it('a lease taken over before the transaction opens: LEASE_LOST, nothing written', () =>
      withBench('fenced-open', async ({ db, ledger, waypoint }) => {
        const thief = await db.sibling();
        knobs.beforeEffects = async (ctx) => {
          assert.ok(await thief.acquireLease(ctx.runId, 'worker-two', 60_000, 'worker-one'));
        };
        await assert.rejects(waypoint.run(Bookkeeping, { runId: 'fenced', input: {} }), (err: WaypointError) => err.code === 'LEASE_LOST');
        assert.equal(knobs.calls, 0, 'the effect never ran');
        assert.deepEqual(await ledgerRows(ledger, 'fenced'), []);
        assert.equal((await thief.getRun('fenced'))?.lastSequence, 0);
      }));

    it('guardedExecute(key, fn, { transactional: true }) takes the same exactly-once path', () =>
      withBench('plain', async ({ ledger, waypoint, ops }) => {
        let failures = 1;
        knobs.afterEffects = () => {
          if (failures-- > 0) throw new Error('fails after the effect');
        };
        await assert.rejects(waypoint.run(Plain, { runId: 'plain', input: {} }), (err: WaypointError) => err.code === 'STEP_FAILED');
        assert.deepEqual(await ledgerRows(ledger, 'plain'), [], 'rolled back with the failed attempt');
        const result = await waypoint.resume<{ booked: { key: string } }>('plain');
        assert.equal(result.status, 'completed');
        const rows = await ledgerRows(ledger, 'plain');
        assert.deepEqual(
          rows.map((r) => [r.item, r.op_key]),
          [['cherries', result.state.booked.key]],
        );
        assert.deepEqual(
          (await ops('plain', 'book-cherries')).map((o) => o.state),
          ['committed'],
        );
      }));

    it('the effect may nest manager.transaction(): a failure inside it is undone alone', () =>
      withBench('nested', async ({ ledger, waypoint }) => {
        knobs.insideEffect = async (op, call) => {
          if (call !== 1) return;
          await assert.rejects(
            currentTransaction().transaction(async (inner) => {
              await book(ledger, inner, { run_id: op.runId, op_key: 'nested', item: 'nested', amount: 100 });
              throw new Error('undo only this');
            }),
            /undo only this/,
          );
        };
        await waypoint.run(Bookkeeping, { runId: 'nested', input: {} });
        assert.deepEqual(
          (await ledgerRows(ledger, 'nested')).map((r) => r.item),
          ['apples', 'pears'],
        );
        assert.equal(await balance(ledger), 15);
      }));

    it('an effect still running after its attempt timed out can write nothing more', () =>
      withBench('timeout', async ({ ledger, waypoint }) => {
        let late: unknown;
        let lateDone!: () => void;
        const lateTried = new Promise<void>((resolve) => (lateDone = resolve));
        knobs.insideEffect = async (op, call) => {
          if (call !== 1) return;
          await sleep(400); // the step's timeout (150 ms) has fired and its transaction rolled back
          try {
            await book(ledger, currentTransaction(), { run_id: op.runId, op_key: 'late', item: 'late', amount: 1 });
          } catch (error) {
            late = error;
          }
          lateDone();
        };
        await assert.rejects(waypoint.run(Hasty, { runId: 'hasty', input: {} }), (err: WaypointError) => err.code === 'STEP_FAILED');
        await lateTried;
        assert.equal((late as WaypointError)?.code, 'TRANSACTION_ENDED', String(late));
        assert.deepEqual(await ledgerRows(ledger, 'hasty'), []);
        const result = await waypoint.resume('hasty');
        assert.equal(result.status, 'completed');
        assert.deepEqual(
          (await ledgerRows(ledger, 'hasty')).map((r) => r.item),
          ['figs'],
        );
      }));

    it("the store's own TypeORM entities work through currentTransaction(), exactly once", () =>
      withBench(
        'entities',
        async ({ ledger, waypoint }) => {
          let failures = 1;
          knobs.afterEffects = () => {
            if (failures-- > 0) throw new Error('fails after the insert');
          };
          const result = await waypoint.run<{ entered: { key: string } }>(Entities, { runId: 'entities', input: {} });
          assert.equal(result.status, 'completed');
          assert.deepEqual(await ledgerRows(ledger, 'entities'), [{ run_id: 'entities', op_key: result.state.entered.key, item: 'entity', amount: 1 }]);
        },
        [LedgerEntry],
      ));

    if (backend.dialect === 'postgres') definePostgresOnly(withBench);
    else defineSqliteOnly(withBench);
  });
}

type WithBench = (name: string, fn: (bench: Bench) => Promise<void>) => Promise<void>;

function definePostgresOnly(withBench: WithBench): void {
  it('a lease taken over while the effect runs: the fenced append in the transaction rejects it, nothing written', () =>
    withBench('fenced-append', async ({ db, ledger, waypoint }) => {
      const thief = await db.sibling();
      knobs.insideEffect = async (op, call) => {
        if (call === 2) assert.ok(await thief.acquireLease(op.runId, 'worker-two', 60_000, 'worker-one'));
      };
      await assert.rejects(waypoint.run(Bookkeeping, { runId: 'fenced-late', input: {} }), (err: WaypointError) => err.code === 'LEASE_LOST');
      assert.equal(knobs.calls, 2, 'both effects ran, inside the transaction');
      assert.deepEqual(await ledgerRows(ledger, 'fenced-late'), []);
      assert.equal(await balance(ledger), 0);
      assert.equal((await thief.getRun('fenced-late'))?.lastSequence, 0);
    }));

  it('a non-transactional effect after a transactional one is recorded on its own and survives a rollback', () =>
    withBench('mixed', async ({ ledger, waypoint, ops }) => {
      knobs.afterEffects = () => {
        throw new Error('fails after both effects');
      };
      await assert.rejects(waypoint.run(Mixed, { runId: 'mixed', input: {} }), (err: WaypointError) => err.code === 'STEP_FAILED');
      assert.deepEqual(await ledgerRows(ledger, 'mixed'), [], 'the transactional effect rolled back');
      assert.deepEqual(
        (await ops('mixed', 'notify')).map((o) => [o.state, o.attempts]),
        [['committed', 1]],
        'the outside effect stays recorded',
      );
      knobs.afterEffects = undefined;
      const result = await waypoint.resume<{ notice: string }>('mixed');
      assert.equal(result.state.notice, 'notified:plums:1', 'recorded result reused, not run again');
      assert.equal((await ledgerRows(ledger, 'mixed')).length, 1);
    }));

  it('a failed statement the effect swallowed leaves the transaction aborted: TRANSACTION_ABORTED, nothing written', () =>
    withBench('aborted', async ({ ledger, waypoint }) => {
      knobs.insideEffect = async () => {
        await currentTransaction()
          .query('SELECT * FROM no_such_table_here')
          .catch(() => undefined);
      };
      await assert.rejects(waypoint.run(Bookkeeping, { runId: 'aborted', input: {} }), (err: WaypointError) => {
        assert.equal(err.code, 'STEP_FAILED');
        assert.equal((err.cause as WaypointError).code, 'TRANSACTION_ABORTED');
        assert.match((err.cause as Error).message, /aborted the transaction/);
        return true;
      });
      assert.deepEqual(await ledgerRows(ledger, 'aborted'), []);
    }));
}

function defineSqliteOnly(withBench: WithBench): void {
  it('a non-transactional effect after a transactional one is refused (EFFECT_AFTER_TRANSACTION), nothing written', () =>
    withBench('mixed', async ({ ledger, waypoint, ops }) => {
      await assert.rejects(waypoint.run(Mixed, { runId: 'mixed', input: {} }), (err: WaypointError) => {
        assert.equal(err.code, 'EFFECT_AFTER_TRANSACTION');
        assert.match(err.message, /Side effect 'notify' in step 'MixedAgent\/mixed' of run 'mixed' is not transactional/);
        return true;
      });
      assert.deepEqual(await ledgerRows(ledger, 'mixed'), []);
      assert.deepEqual(await ops('mixed', 'notify'), []);
    }));

  it("other runs on the store wait while a step's transaction is open, and are never part of it", () =>
    withBench('serialized', async ({ ledger, waypoint }) => {
      let holding!: () => void;
      const held = new Promise<void>((resolve) => (holding = resolve));
      let letGo!: () => void;
      const release = new Promise<void>((resolve) => (letGo = resolve));
      knobs.insideEffect = async (op, call) => {
        if (call !== 1) return;
        holding();
        await release;
      };
      knobs.afterEffects = (ctx) => {
        if (ctx.attempt === 1) throw new Error('A rolls back after B tried to write');
      };
      const a = waypoint.run(Bookkeeping, { runId: 'A', input: {} });
      await held;
      let bDone = false;
      const b = waypoint.run(Tallying, { runId: 'B', input: {} }).then((r) => ((bDone = true), r));
      await sleep(150);
      assert.equal(bDone, false, "B cannot write while A's transaction holds the connection");
      letGo();
      const [ra, rb] = await Promise.all([a, b]);
      assert.equal(ra.status, 'completed');
      assert.equal(rb.status, 'completed');
      assert.equal(rb.lastSequence, 3, "B's checkpoints survived A's rollback");
      assert.deepEqual(
        (await waypoint.store.listSteps('B')).map((s) => s.stepName),
        ['one', 'two', 'three'],
      );
      assert.deepEqual(
        (await ledgerRows(ledger, 'A')).map((r) => r.item),
        ['apples', 'pears'],
      );
    }));
}
