import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ContainerModule, injectable } from 'inversify';
import {
  Agent,
  MemoryCheckpointStore,
  Pipeline,
  SideEffect,
  Step,
  TOKENS,
  Waypoint,
  currentOperation,
  guardedExecute,
  serialize,
  type ReconcileOutcome,
  type StepContext,
  type WaypointError,
} from '../../src/index';
import { sha256 } from '../../src/core/state/serializer';
import { silent } from './transactional-fixtures';

// guardedExecute(key, fn) is the plain-function path of the idempotency guard: no decorator, no class,
// the same log, keys, retries and reconcile as @SideEffect.

interface Charge {
  key: string;
  attempt: number;
}
let charges: Charge[] = [];
let failStep = 0;
let failCharge = 0;
let reconcileAnswer: ReconcileOutcome = { happened: false };
let reconciled: string[] = [];

/** A plain function, called from steps: no decorator anywhere. */
function chargeCard(orderId: string): Promise<{ chargeId: string }> {
  return guardedExecute(
    `charge:${orderId}`,
    () => {
      const op = currentOperation();
      if (failCharge > 0) {
        failCharge -= 1;
        return Promise.reject(new Error('card network timeout'));
      }
      charges.push({ key: op.key, attempt: op.attempt });
      return Promise.resolve({ chargeId: `ch-${charges.length}` });
    },
    {
      retries: { maxAttempts: 3, initialDelayMs: 1, jitter: false },
      reconcile: ({ key }) => (reconciled.push(key), reconcileAnswer),
    },
  );
}

class Checkout extends Agent {
  @Step({ retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } })
  async pay(ctx: StepContext) {
    const charge = await chargeCard('o-1');
    if (failStep > 0) {
      failStep -= 1;
      throw new Error(`step fails after the charge (attempt ${ctx.attempt})`);
    }
    return { charge };
  }

  /** The same key again, in a later step of the same run: one operation, already committed. */
  @Step()
  async payAgain() {
    return { again: await chargeCard('o-1') };
  }
}

@Pipeline({ name: 'checkout', version: '1.0.0', agents: [Checkout] })
class CheckoutPipeline {}

@injectable()
class Outer {
  @SideEffect({ name: 'outer' })
  async run(): Promise<string> {
    // Inside a side effect, a guardedExecute is part of it: it runs directly, with the outer key.
    return guardedExecute('inner', () => `inner ran with ${currentOperation().name}`);
  }
}

class Nesting extends Agent {
  @Step() async nest() {
    return { said: await new Outer().run() };
  }
}

@Pipeline({ name: 'nesting', version: '1.0.0', agents: [Nesting] })
class NestingPipeline {}

function storage(store: MemoryCheckpointStore): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
    bind(TOKENS.Logger).toConstantValue(silent);
  });
}

const expectedKey = (runId: string, key: string) => sha256(JSON.stringify(['key', runId, key]));

beforeEach(() => {
  charges = [];
  failStep = 0;
  failCharge = 0;
  reconcileAnswer = { happened: false };
  reconciled = [];
});

describe('guardedExecute(key, fn): the plain-function path', () => {
  it('outside a run it rejects with SIDE_EFFECT_OUTSIDE_RUN and does not call fn', async () => {
    await assert.rejects(chargeCard('o-1'), (err: WaypointError) => {
      assert.equal(err.code, 'SIDE_EFFECT_OUTSIDE_RUN');
      assert.match(err.message, /'charge:o-1' \(guardedExecute\)/);
      return true;
    });
    assert.deepEqual(charges, []);
  });

  it('runs fn once per run: a step retry and a later step with the same key get the recorded result', async () => {
    const store = new MemoryCheckpointStore();
    const waypoint = await Waypoint.create({ modules: [storage(store)] });
    failStep = 1;
    const result = await waypoint.run<{ charge: unknown; again: unknown }>(CheckoutPipeline, { runId: 'r1', input: {} });
    assert.equal(result.status, 'completed');
    assert.deepEqual(charges, [{ key: expectedKey('r1', 'charge:o-1'), attempt: 1 }]);
    assert.deepEqual(result.state.charge, { chargeId: 'ch-1' });
    assert.deepEqual(result.state.again, { chargeId: 'ch-1' });
    const ops = (await store.listOperations('r1')).filter((o) => o.name === 'charge:o-1');
    assert.deepEqual(
      ops.map((o) => [o.operationKey, o.state, o.attempts]),
      [[expectedKey('r1', 'charge:o-1'), 'committed', 1]],
    );
    const rows = await store.listSteps('r1');
    assert.deepEqual(
      rows.map((r) => r.sideEffectsCommitted),
      [true, true],
    );
  });

  it('the key is per run and the same in every process: a second Waypoint on the store reuses the result', async () => {
    const store = new MemoryCheckpointStore();
    const first = await Waypoint.create({ modules: [storage(store)] });
    failStep = 2; // both attempts fail after the charge: the run fails
    await assert.rejects(first.run(CheckoutPipeline, { runId: 'r2', input: {} }), (err: WaypointError) => err.code === 'STEP_FAILED');
    const second = await Waypoint.create({ modules: [storage(store)], pipelines: [CheckoutPipeline] });
    const result = await second.resume<{ charge: unknown }>('r2');
    assert.equal(result.status, 'completed');
    assert.equal(charges.length, 1, 'charged once across two instances');
    await second.run(CheckoutPipeline, { runId: 'r3', input: {} });
    assert.deepEqual(
      charges.map((c) => c.key),
      [expectedKey('r2', 'charge:o-1'), expectedKey('r3', 'charge:o-1')],
      'another run, another key',
    );
  });

  it("takes @SideEffect's options: retries within the step attempt, failures recorded", async () => {
    const store = new MemoryCheckpointStore();
    const waypoint = await Waypoint.create({ modules: [storage(store)] });
    failCharge = 2;
    await waypoint.run(CheckoutPipeline, { runId: 'r4', input: {} });
    assert.deepEqual(charges, [{ key: expectedKey('r4', 'charge:o-1'), attempt: 3 }]);
    const [op] = (await store.listOperations('r4')).filter((o) => o.name === 'charge:o-1');
    assert.deepEqual([op.state, op.attempts], ['committed', 3]);
  });

  it('an operation left started by a crash goes to its reconcile hook', async () => {
    const store = new MemoryCheckpointStore();
    const runId = 'r5';
    await store.createRun({ runId, pipelineName: 'checkout', pipelineVersion: '1.0.0', input: serialize({}), metadata: serialize({}) });
    const lease = await store.acquireLease(runId, 'crashed-worker', 1);
    const key = expectedKey(runId, 'charge:o-1');
    await store.beginOperation({ operationKey: key, runId, stepKey: 'Checkout/pay', name: 'charge:o-1' }, { epoch: lease!.epoch });
    await sleep(5); // the crashed worker's lease expires
    reconcileAnswer = { happened: true, result: { chargeId: 'ch-found-at-provider' } };
    const waypoint = await Waypoint.create({ modules: [storage(store)] });
    const result = await waypoint.run<{ charge: unknown }>(CheckoutPipeline, { runId, input: {} });
    assert.deepEqual(reconciled, [key]);
    assert.deepEqual(charges, [], 'not charged again');
    assert.deepEqual(result.state.charge, { chargeId: 'ch-found-at-provider' });
  });

  it('inside a side effect it is part of that effect: it runs directly, under the outer operation', async () => {
    const store = new MemoryCheckpointStore();
    const waypoint = await Waypoint.create({ modules: [storage(store)] });
    const result = await waypoint.run<{ said: string }>(NestingPipeline, { runId: 'r6', input: {} });
    assert.equal(result.state.said, 'inner ran with outer');
    assert.deepEqual(
      (await store.listOperations('r6')).map((o) => o.name),
      ['outer'],
    );
  });
});
