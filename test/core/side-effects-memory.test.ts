import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it, beforeEach } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ContainerModule, inject, injectable } from 'inversify';
import {
  Agent,
  MemoryCheckpointStore,
  NonRetryableError,
  Pipeline,
  SideEffect,
  Step,
  StepFailedError,
  TOKENS,
  Waypoint,
  WaypointError,
  currentOperation,
  operationKey,
  serialize,
  type Logger,
  type ReconcileContext,
  type ReconcileOutcome,
  type StepContext,
} from '../../src/index';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

interface Sent {
  to: string;
  key: string;
  attempt: number;
}
let sent: Sent[] = [];
let failSends = 0;
let failSendsWith: () => Error = () => new Error('smtp down');

@injectable()
class Mailer {
  @SideEffect({ name: 'send-report' })
  send(to: string): Promise<string> {
    const op = currentOperation();
    if (failSends > 0) {
      failSends -= 1;
      return Promise.reject(failSendsWith());
    }
    sent.push({ to, key: op.key, attempt: op.attempt });
    return Promise.resolve(`receipt-${sent.length}`);
  }
}

@injectable()
class FlakyMailer {
  @SideEffect({ name: 'flaky-send', retries: { maxAttempts: 3, initialDelayMs: 1, jitter: false } })
  send(to: string): Promise<string> {
    const op = currentOperation();
    if (failSends > 0) {
      failSends -= 1;
      return Promise.reject(new Error(`flaky ${op.attempt}`));
    }
    sent.push({ to, key: op.key, attempt: op.attempt });
    return Promise.resolve(`flaky-receipt-${op.attempt}`);
  }
}

let failStepAfterEffects = 0;
let nonRetryableAfterEffects = false;
let receipts: string[][] = [];

@injectable()
class Notifier extends Agent {
  constructor(@inject(Mailer) private readonly mailer: Mailer) {
    super();
  }

  @Step({ retries: { maxAttempts: 3, initialDelayMs: 1, jitter: false } })
  async notify(ctx: StepContext) {
    const first = await this.mailer.send('alice@example.com');
    const second = await this.mailer.send('bob@example.com');
    receipts.push([first, second]);
    if (nonRetryableAfterEffects) throw new NonRetryableError('crash after the effects');
    if (failStepAfterEffects > 0) {
      failStepAfterEffects -= 1;
      throw new Error('transient failure after the effects');
    }
    return { receipts: [first, second], attempt: ctx.attempt };
  }
}

@Pipeline({ name: 'notify', version: '1.0.0', agents: [Notifier] })
class NotifyPipeline {}

@injectable()
class FlakyNotifier extends Agent {
  constructor(@inject(FlakyMailer) private readonly mailer: FlakyMailer) {
    super();
  }
  @Step() async notify() {
    return { receipt: await this.mailer.send('carol@example.com') };
  }
}
@Pipeline({ name: 'notify-flaky', version: '1.0.0', agents: [FlakyNotifier] })
class FlakyNotifyPipeline {}

// --- reconcile ----------------------------------------------------------------------------------------
let charges: { amount: number; key: string }[] = [];
let reconcileCalls: ReconcileContext[] = [];
let reconcileAnswer: ReconcileOutcome = { happened: false };

@injectable()
class Payments {
  @SideEffect({
    name: 'charge-card',
    reconcile: (ctx) => {
      reconcileCalls.push(ctx);
      return reconcileAnswer;
    },
  })
  charge(amount: number): Promise<{ chargeId: string }> {
    charges.push({ amount, key: currentOperation().key });
    return Promise.resolve({ chargeId: `ch-${charges.length}` });
  }
}

@injectable()
class Biller extends Agent {
  constructor(@inject(Payments) private readonly payments: Payments) {
    super();
  }
  @Step() async bill() {
    return { charge: await this.payments.charge(42) };
  }
}
@Pipeline({ name: 'billing', version: '1.0.0', agents: [Biller] })
class BillingPipeline {}

function services(store: MemoryCheckpointStore): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
    bind(TOKENS.Logger).toConstantValue(silent);
    bind(Mailer).toSelf().inSingletonScope();
    bind(FlakyMailer).toSelf().inSingletonScope();
    bind(Payments).toSelf().inSingletonScope();
  });
}

/** Operations of side effects named `name` (the log also holds the runtime's own records, e.g. failed step attempts). */
async function effects(store: MemoryCheckpointStore, runId: string, name: string) {
  return (await store.listOperations(runId)).filter((o) => o.name === name);
}

async function setup(store = new MemoryCheckpointStore()) {
  return { waypoint: await Waypoint.create({ modules: [services(store)] }), store };
}

beforeEach(() => {
  sent = [];
  failSends = 0;
  failSendsWith = () => new Error('smtp down');
  failStepAfterEffects = 0;
  nonRetryableAfterEffects = false;
  receipts = [];
  charges = [];
  reconcileCalls = [];
  reconcileAnswer = { happened: false };
});

describe('@SideEffect on an injected service (memory store)', () => {
  it('runs once per call per run; a step retry after the effects gets the recorded results', async () => {
    const { waypoint, store } = await setup();
    failStepAfterEffects = 1;
    const result = await waypoint.run(NotifyPipeline, { runId: 'once', input: {} });
    assert.equal(result.status, 'completed');
    assert.deepEqual(
      sent.map((s) => s.to),
      ['alice@example.com', 'bob@example.com'],
      'each effect ran exactly once',
    );
    assert.deepEqual(receipts, [
      ['receipt-1', 'receipt-2'],
      ['receipt-1', 'receipt-2'],
    ]);
    assert.deepEqual(result.state, { receipts: ['receipt-1', 'receipt-2'], attempt: 2 });
    const ops = await effects(store, 'once', 'send-report');
    assert.equal(ops.length, 2, JSON.stringify(ops, null, 1));
    assert.ok(ops.every((o) => o.state === 'committed' && o.attempts === 1 && o.stepKey === 'Notifier/notify' && o.name === 'send-report'));
    const [row] = await store.listSteps('once');
    assert.equal(row.sideEffectsCommitted, true);
    assert.equal(row.attempt, 2);

    // running the completed run again runs nothing
    await waypoint.run(NotifyPipeline, { runId: 'once', input: {} });
    assert.equal(sent.length, 2);
  });

  it('two calls in one step get different, deterministic keys (run, agent, step, operation, ordinal)', async () => {
    const { waypoint } = await setup();
    await waypoint.run(NotifyPipeline, { runId: 'keys', input: {} });
    const [first, second] = sent;
    assert.notEqual(first.key, second.key);
    assert.equal(first.key, operationKey('keys', 'Notifier', 'notify', 'send-report', 1));
    assert.equal(second.key, operationKey('keys', 'Notifier', 'notify', 'send-report', 2));
    assert.equal(first.attempt, 1);
    // the key depends on the run id
    assert.notEqual(operationKey('other', 'Notifier', 'notify', 'send-report', 1), first.key);
  });

  it('keys are the same across two Waypoint instances sharing one store: a resume reuses the results', async () => {
    const store = new MemoryCheckpointStore();
    const one = await setup(store);
    nonRetryableAfterEffects = true;
    await assert.rejects(one.waypoint.run(NotifyPipeline, { runId: 'shared', input: {} }), (err: WaypointError) => err.code === 'STEP_FAILED');
    assert.equal(sent.length, 2);
    const keysBefore = (await effects(store, 'shared', 'send-report')).map((o) => o.operationKey).sort();
    assert.deepEqual(keysBefore, [operationKey('shared', 'Notifier', 'notify', 'send-report', 1), operationKey('shared', 'Notifier', 'notify', 'send-report', 2)].sort());

    nonRetryableAfterEffects = false;
    const two = await setup(store);
    assert.notEqual(two.waypoint.container, one.waypoint.container);
    const result = await two.waypoint.run(NotifyPipeline, { runId: 'shared', input: {} });
    assert.equal(result.status, 'completed');
    assert.equal(sent.length, 2, 'the second instance did not send again');
    assert.deepEqual(result.state.receipts, ['receipt-1', 'receipt-2']);
    assert.deepEqual((await effects(store, 'shared', 'send-report')).map((o) => o.operationKey).sort(), keysBefore);
  });

  it('outside a run the call rejects with SIDE_EFFECT_OUTSIDE_RUN and does not run', async () => {
    const { waypoint } = await setup();
    const mailer = waypoint.container.get(Mailer);
    await assert.rejects(mailer.send('x@example.com'), (err: WaypointError) => {
      assert.equal(err.code, 'SIDE_EFFECT_OUTSIDE_RUN');
      assert.ok(err.message.includes("'send-report'"), err.message);
      return true;
    });
    assert.equal(sent.length, 0);
  });

  it('a side effect that throws is recorded failed, never committed; a later resume runs it with the same key', async () => {
    const { waypoint, store } = await setup();
    failSends = 3; // one per step attempt
    await assert.rejects(waypoint.run(NotifyPipeline, { runId: 'failing', input: {} }), (err: unknown) => {
      assert.ok(err instanceof StepFailedError);
      assert.equal(err.attempts, 3);
      const cause = err.cause as WaypointError & { operationKey: string };
      assert.equal(cause.code, 'SIDE_EFFECT_FAILED');
      assert.equal(cause.operationKey, operationKey('failing', 'Notifier', 'notify', 'send-report', 1));
      assert.ok(cause.message.includes("Side effect 'send-report' in step 'Notifier/notify' of run 'failing' failed: smtp down"), cause.message);
      return true;
    });
    const ops = await effects(store, 'failing', 'send-report');
    assert.equal(ops.length, 1, 'the second call never started');
    assert.equal(ops[0].state, 'failed');
    assert.equal(ops[0].result, null);
    assert.ok(ops[0].error?.includes('smtp down'));
    assert.equal(ops[0].attempts, 3);
    assert.equal(sent.length, 0);
    assert.deepEqual(await store.listSteps('failing'), []);

    const resumed = await waypoint.resume('failing');
    assert.equal(resumed.status, 'completed');
    assert.equal(sent[0].key, ops[0].operationKey);
    const after = await effects(store, 'failing', 'send-report');
    assert.ok(after.every((o) => o.state === 'committed'));
  });

  it('a side effect throwing NonRetryableError fails the step at once (no step retry re-runs it)', async () => {
    const { waypoint, store } = await setup();
    failSends = 10;
    failSendsWith = () => new NonRetryableError('address rejected permanently');
    await assert.rejects(waypoint.run(NotifyPipeline, { runId: 'permanent', input: {} }), (err: unknown) => {
      assert.ok(err instanceof WaypointError);
      assert.ok(err.message.includes('address rejected permanently'), err.message);
      return true;
    });
    const ops = await effects(store, 'permanent', 'send-report');
    assert.equal(ops[0].attempts, 1, `the effect was attempted ${ops[0].attempts} times`);
    assert.equal(10 - failSends, 1);
  });

  it("an effect's own retries: fails twice, then commits on its third attempt within one step attempt", async () => {
    const { waypoint, store } = await setup();
    failSends = 2;
    const result = await waypoint.run(FlakyNotifyPipeline, { runId: 'effect-retries', input: {} });
    assert.equal(result.status, 'completed');
    assert.deepEqual(result.state, { receipt: 'flaky-receipt-3' });
    const [op] = await effects(store, 'effect-retries', 'flaky-send');
    assert.equal(op.state, 'committed');
    assert.equal(op.attempts, 3);
    assert.equal((await store.listSteps('effect-retries'))[0].attempt, 1);
  });
});

describe("reconcile hook for an operation left 'started' (a crash between the effect and its record)", () => {
  /** Seeds the state a crashed worker leaves: the run exists, the charge started, its lease expired. */
  async function seedCrashedCharge(store: MemoryCheckpointStore, runId: string): Promise<string> {
    const input = { customer: 'c-1' };
    await store.createRun({ runId, pipelineName: 'billing', pipelineVersion: '1.0.0', input: serialize(input), metadata: serialize({}) });
    const lease = await store.acquireLease(runId, 'crashed-worker', 1);
    assert.ok(lease);
    const key = operationKey(runId, 'Biller', 'bill', 'charge-card', 1);
    const op = await store.beginOperation({ operationKey: key, runId, stepKey: 'Biller/bill', name: 'charge-card' }, { epoch: lease.epoch });
    assert.equal(op.state, 'started');
    await sleep(5); // the crashed worker's lease expires
    return key;
  }

  it('is called with run, operation, key and args; "happened" commits its result without running the effect', async () => {
    const { waypoint, store } = await setup();
    const key = await seedCrashedCharge(store, 'crashed-1');
    reconcileAnswer = { happened: true, result: { chargeId: 'ch-from-provider' } };
    const result = await waypoint.run(BillingPipeline, { runId: 'crashed-1', input: { customer: 'c-1' } });
    assert.equal(result.status, 'completed');
    assert.deepEqual(reconcileCalls, [{ runId: 'crashed-1', operation: 'charge-card', key, args: [42] }]);
    assert.deepEqual(charges, [], 'the charge was not repeated');
    assert.deepEqual(result.state, { customer: 'c-1', charge: { chargeId: 'ch-from-provider' } });
    const [op] = await effects(store, 'crashed-1', 'charge-card');
    assert.equal(op.state, 'committed');
    assert.equal((await store.listSteps('crashed-1'))[0].sideEffectsCommitted, true);
  });

  it('"did not happen" runs the effect again with the same key', async () => {
    const { waypoint, store } = await setup();
    const key = await seedCrashedCharge(store, 'crashed-2');
    reconcileAnswer = { happened: false };
    const result = await waypoint.run(BillingPipeline, { runId: 'crashed-2', input: { customer: 'c-1' } });
    assert.equal(result.status, 'completed');
    assert.equal(reconcileCalls.length, 1);
    assert.deepEqual(charges, [{ amount: 42, key }]);
    const [op] = await effects(store, 'crashed-2', 'charge-card');
    assert.equal(op.state, 'committed');
    assert.equal(op.attempts, 2);
  });

  it('is not called for a fresh operation or a committed one', async () => {
    const { waypoint } = await setup();
    await waypoint.run(BillingPipeline, { runId: 'fresh', input: { customer: 'c-1' } });
    assert.equal(reconcileCalls.length, 0);
    assert.equal(charges.length, 1);
  });
});
