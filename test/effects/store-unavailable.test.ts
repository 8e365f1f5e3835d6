import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, beforeEach, describe, it } from 'node:test';
import { ContainerModule, inject, injectable } from 'inversify';
import { Agent, Pipeline, SideEffect, Step, Waypoint, currentOperation, operationKey, postgresStorage, type WaypointError } from '../../src/index';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { TcpProxy } from '../helpers/tcp-proxy';
import { ledgerRows, postgresLedger, type LedgerDb } from './ledger';
import { Bookkeeping, effectsModule, knobs, resetKnobs } from './transactional-fixtures';

// PostgreSQL behind a TCP proxy of the test's own: cutting the proxy makes the store unreachable for
// this Waypoint only. The test reads what was stored on a direct connection.

let proxy: TcpProxy;
before(async () => {
  proxy = await TcpProxy.start({ port: Number(new URL(PG_TEST_URL).port || 5432) });
});
after(() => proxy.close());

/** External calls as the provider saw them. */
let received: { key: string; to: string }[] = [];
/** Runs inside the effect, after the provider accepted the call. */
let afterSend: (() => void) | undefined;
/** Runs in the step after its effect. */
let afterStepEffects: (() => void) | undefined;

@injectable()
class Sender {
  @SideEffect({ name: 'send' })
  send(to: string): Promise<string> {
    received.push({ key: currentOperation().key, to });
    afterSend?.();
    return Promise.resolve(`sent:${to}`);
  }
}

@injectable()
class Announcer extends Agent {
  constructor(@inject(Sender) private readonly sender: Sender) {
    super();
  }
  @Step() async announce() {
    const receipt = await this.sender.send('team@example.com');
    afterStepEffects?.();
    return { receipt };
  }
}

@Pipeline({ name: 'announce', version: '1.0.0', agents: [Announcer] })
class Announcing {}

interface Bench {
  waypoint: Waypoint;
  /** The same schema on a direct connection (not through the proxy). */
  direct: TypeOrmCheckpointStore;
  ledger: LedgerDb;
}

async function withBench(name: string, fn: (bench: Bench) => Promise<void>): Promise<void> {
  const schema = schemaFor(`effects store-unavailable: ${name}`);
  await dropSchema(schema);
  const ledger = await postgresLedger(PG_TEST_URL, schema);
  const services = new ContainerModule(({ bind }) => void bind(Sender).toSelf().inSingletonScope());
  const waypoint = await Waypoint.create({
    modules: [effectsModule(ledger), services, postgresStorage({ url: proxy.url('postgres', new URL(PG_TEST_URL).pathname), schema, poolSize: 2 })],
    workerId: 'proxied-worker',
  });
  const direct = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 2 });
  await direct.init();
  try {
    await fn({ waypoint, direct, ledger });
  } finally {
    proxy.restore();
    await waypoint.close().catch(() => undefined);
    await direct.close();
    await ledger.close();
    await dropSchema(schema);
  }
}

beforeEach(() => {
  resetKnobs();
  received = [];
  afterSend = undefined;
  afterStepEffects = undefined;
  proxy.restore();
});

describe('the store becomes unreachable while side effects are recorded (PostgreSQL behind a cut proxy)', { timeout: 60_000 }, () => {
  it('after an external effect ran, before its record: STORE_UNAVAILABLE, not marked committed; the resume repeats it with the same key', () =>
    withBench('record', async ({ waypoint, direct }) => {
      afterSend = () => ((afterSend = undefined), proxy.cut());
      await assert.rejects(waypoint.run(Announcing, { runId: 'down-record', input: {} }), (err: WaypointError) => {
        assert.equal(err.code, 'STORE_UNAVAILABLE');
        assert.match(err.message, /Checkpoint store \(postgres\) failed during finishOperation for run 'down-record'/);
        assert.match(err.message, /resume the run once the store is reachable/);
        return true;
      });
      const key = operationKey('down-record', 'Announcer', 'announce', 'send', 1);
      const [op] = await direct.listOperations('down-record');
      assert.deepEqual([op?.operationKey, op?.state, op?.result], [key, 'started', null], 'started, never marked committed');
      assert.deepEqual(await direct.listSteps('down-record'), []);

      proxy.restore();
      const result = await waypoint.resume<{ receipt: string }>('down-record');
      assert.equal(result.status, 'completed');
      assert.equal(result.state.receipt, 'sent:team@example.com');
      assert.deepEqual(
        received.map((r) => r.key),
        [key, key],
        'repeated once, with the same idempotency key',
      );
      const [done] = await direct.listOperations('down-record');
      assert.deepEqual([done?.state, done?.attempts], ['committed', 2]);
    }));

  it('after the effect was recorded, before the checkpoint: the resume re-runs the step and reuses the recorded result', () =>
    withBench('checkpoint', async ({ waypoint, direct }) => {
      afterStepEffects = () => ((afterStepEffects = undefined), proxy.cut());
      await assert.rejects(waypoint.run(Announcing, { runId: 'down-checkpoint', input: {} }), (err: WaypointError) => err.code === 'STORE_UNAVAILABLE');
      assert.deepEqual(
        (await direct.listOperations('down-checkpoint')).map((o) => o.state),
        ['committed'],
      );
      assert.deepEqual(await direct.listSteps('down-checkpoint'), []);
      proxy.restore();
      const result = await waypoint.resume('down-checkpoint');
      assert.equal(result.status, 'completed');
      assert.equal(received.length, 1, 'not sent again');
    }));

  it('inside a transactional effect: STORE_UNAVAILABLE, its rows and record rolled back with the connection; the resume applies it once', () =>
    withBench('transactional', async ({ waypoint, direct, ledger }) => {
      knobs.insideEffect = (_op, call) => {
        if (call === 2) proxy.cut();
      };
      await assert.rejects(waypoint.run(Bookkeeping, { runId: 'down-tx', input: {} }), (err: WaypointError) => {
        assert.equal(err.code, 'STORE_UNAVAILABLE');
        assert.match(err.message, /run 'down-tx'/);
        return true;
      });
      assert.deepEqual(await ledgerRows(ledger, 'down-tx'), [], 'nothing of the step was committed');
      assert.deepEqual(
        (await direct.listOperations('down-tx')).filter((o) => o.name === 'book'),
        [],
      );
      assert.deepEqual(await direct.listSteps('down-tx'), []);

      proxy.restore();
      const result = await waypoint.resume('down-tx');
      assert.equal(result.status, 'completed');
      assert.deepEqual(
        (await ledgerRows(ledger, 'down-tx')).map((r) => r.item),
        ['apples', 'pears'],
        'applied exactly once',
      );
    }));

  it('at the commit of a transactional step: nothing committed; the resume applies it once', () =>
    withBench('commit', async ({ waypoint, ledger }) => {
      knobs.afterEffects = () => ((knobs.afterEffects = undefined), proxy.cut());
      await assert.rejects(waypoint.run(Bookkeeping, { runId: 'down-commit', input: {} }), (err: WaypointError) => err.code === 'STORE_UNAVAILABLE');
      assert.deepEqual(await ledgerRows(ledger, 'down-commit'), []);
      proxy.restore();
      await waypoint.resume('down-commit');
      assert.deepEqual(
        (await ledgerRows(ledger, 'down-commit')).map((r) => r.item),
        ['apples', 'pears'],
      );
    }));
});
