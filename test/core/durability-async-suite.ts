import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, beforeEach, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ContainerModule } from 'inversify';
import { Agent, Pipeline, SideEffect, Step, StoreUnavailableError, TOKENS, Waypoint, type CheckpointStore, type Logger, type StepContext } from '../../src/index';
import { deferred, heldModule, HeldAppends, orAfter } from './durability-async-store';

/*
 * durability: 'async' against one backend: a step starts while the previous step's row is written, and
 * nothing that must not run ahead of the record does (a side effect, a sleep, the run's end); a write
 * that fails stops the run as in 'sync' mode, with no later row written; rows stay in order.
 */

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };
const held = new HeldAppends();
let events: string[] = [];
let effects: { step: string; landedBefore: string[] }[] = [];
let bStarted = deferred();
let s07Ran = deferred();
let s07HasRun = false;

class OverlapAgent extends Agent {
  @Step() a() {
    events.push('start a');
    return { a: 1 };
  }
  @Step() b() {
    events.push('start b');
    bStarted.resolve();
    return { b: 2 };
  }
  @Step() c(ctx: StepContext<{ a: number; b: number }>) {
    return { c: ctx.state.a + ctx.state.b };
  }
}
@Pipeline({ name: 'durability-overlap', version: '1', agents: [OverlapAgent] })
class Overlap {}

class EffectAgent extends Agent {
  @SideEffect({ name: 'charge' }) charge(step: string): Promise<string> {
    effects.push({ step, landedBefore: held.names() });
    return Promise.resolve(`receipt-${step}`);
  }
  @Step() a() {
    return { a: 1 };
  }
  @Step() b() {
    return { b: 1 };
  }
  @Step() async c(ctx: StepContext) {
    await ctx.sleep(0);
    events.push(`c slept after ${held.names().join(',')}`);
    return { receipt: await this.charge('c') };
  }
  @Step() d() {
    return { d: 1 };
  }
}
@Pipeline({ name: 'durability-effects', version: '1', agents: [EffectAgent] })
class Effects {}

/** Twenty steps, each adding one to `n` and its number to `trail`: a later step sees every earlier update. */
class ManyAgent extends Agent {}
const MANY = 20;
for (let i = 0; i < MANY; i++) {
  const name = `s${String(i).padStart(2, '0')}`;
  const method = (ctx: StepContext<{ n?: number; trail?: number[] }>) => {
    if (i === 7) {
      s07HasRun = true;
      s07Ran.resolve();
    }
    return { n: (ctx.state.n ?? 0) + 1, trail: [...(ctx.state.trail ?? []), i] };
  };
  Object.defineProperty(ManyAgent.prototype, name, { value: method, writable: true, configurable: true });
  Step()(ManyAgent.prototype, name, Object.getOwnPropertyDescriptor(ManyAgent.prototype, name)!);
}
@Pipeline({ name: 'durability-many', version: '1', agents: [ManyAgent] })
class Many {}

/** Each write waits a few milliseconds (in flight long enough for the next steps to start). */
const slowWrites = (ms: () => number) => (held.gate = () => sleep(ms()));

export function durabilityAsyncSuite(name: string, makeStorage: () => ContainerModule, cleanup: () => Promise<void> = () => Promise.resolve()): void {
  const opened: Waypoint[] = [];
  let inner: CheckpointStore;
  let module: ContainerModule;
  const open = async (durability: 'sync' | 'async') => {
    const quiet = new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent));
    const waypoint = await Waypoint.create({ modules: [module, quiet], durability, pipelines: [Overlap, Effects, Many] });
    opened.push(waypoint);
    return waypoint;
  };
  let runs = 0;
  const runId = (label: string) => `durability-${label}-${++runs}-${process.pid}`;

  before(async () => {
    ({ module, inner } = await heldModule(makeStorage(), held));
  });
  after(async () => {
    for (const waypoint of opened.splice(0)) await waypoint.close();
    await cleanup();
  });
  beforeEach(() => {
    held.reset();
    events = [];
    effects = [];
    bStarted = deferred();
    s07Ran = deferred();
    s07HasRun = false;
  });

  describe(`durability 'async' on ${name}`, () => {
    for (const durability of ['async', 'sync'] as const) {
      it(`${durability === 'async' ? 'starts' : "'sync' does not start"} step N+1 while step N's row is being appended`, async () => {
        // a's write is held until b starts (or, in 'sync' where b cannot start first, until a guard lets it go).
        held.gate = async (rows) => {
          if (rows.some((row) => row.stepName === 'a')) await orAfter(bStarted.promise, 1_000);
        };
        held.onLanded = (rows) => events.push(...rows.map((row) => `landed ${row.stepName}`));
        const waypoint = await open(durability);
        const result = await waypoint.run(Overlap, { runId: runId(`overlap-${durability}`), input: {} });
        assert.equal(result.status, 'completed');
        assert.deepEqual({ ...result.state }, { a: 1, b: 2, c: 3 });
        const startB = events.indexOf('start b');
        const landedA = events.indexOf('landed a');
        if (durability === 'async') assert.ok(startB < landedA, `b starts before a's row lands: ${events.join(' | ')}`);
        else assert.ok(landedA < startB, `'sync': a's row lands before b starts: ${events.join(' | ')}`);
      });
    }

    it('runs a side effect and a sleep only once every earlier row is durable', async () => {
      slowWrites(() => 15);
      const waypoint = await open('async');
      const result = await waypoint.run(Effects, { runId: runId('effects'), input: {} });
      assert.equal(result.status, 'completed');
      assert.deepEqual(events, ['c slept after a,b']);
      assert.equal(effects.length, 1);
      assert.deepEqual(effects[0].landedBefore, ['a', 'b']);
    });

    it('reports the run completed only once its last row is durable', async () => {
      slowWrites(() => 10);
      const waypoint = await open('async');
      const id = runId('end');
      const result = await waypoint.run(Many, { runId: id, input: {} });
      assert.equal(result.status, 'completed');
      // Read at once, from the store itself: every row is there and the run is closed.
      assert.equal(held.landed.length, MANY);
      const rows = await inner.listSteps(id);
      assert.equal(rows.length, MANY);
      assert.equal((await inner.getRun(id))?.status, 'completed');
    });

    it('stops the run on a failed in-flight append as sync mode does, with no later row and no effect', async () => {
      const outcomes: Record<string, unknown> = {};
      for (const durability of ['sync', 'async'] as const) {
        held.reset();
        effects = [];
        held.gate = async (rows) => {
          await sleep(10);
          if (rows.some((row) => row.stepName === 'b')) throw new StoreUnavailableError(inner.backend, 'appendStep', new Error('connection reset'));
        };
        const waypoint = await open(durability);
        const id = runId(`fail-${durability}`);
        const error = await waypoint.run(Effects, { runId: id, input: {} }).then(
          () => null,
          (e: unknown) => e,
        );
        const rows = await inner.listSteps(id);
        outcomes[durability] = {
          code: (error as { code?: string } | null)?.code,
          rows: rows.map((row) => `${row.sequence}:${row.stepName}`),
          status: (await inner.getRun(id))?.status,
          effects: effects.length,
        };
        // Resumed with the store back: the run completes, its rows contiguous, its effect once.
        held.gate = () => Promise.resolve();
        const resumed = await waypoint.run(Effects, { runId: id });
        assert.equal(resumed.status, 'completed');
        assert.deepEqual(
          (await inner.listSteps(id)).map((row) => `${row.sequence}:${row.stepName}`),
          ['1:a', '2:b', '3:c', '4:d'],
        );
        assert.equal(effects.length, 1);
      }
      // A store that is down is not written a failure either: the run stays as its last row left it.
      assert.deepEqual(outcomes.sync, { code: 'STORE_UNAVAILABLE', rows: ['1:a'], status: 'running', effects: 0 });
      // 'async' stops the same way; a's row may have left in the same write as b's (in flight, in the window).
      const { rows, ...rest } = outcomes.async as { rows: string[] };
      const { rows: _syncRows, ...syncRest } = outcomes.sync as { rows: string[] };
      assert.deepEqual(rest, syncRest);
      assert.ok(rows.length === 0 || (rows.length === 1 && rows[0] === '1:a'), rows.join(','));
    });

    it('writes no row after a failed one, though later steps ran while it was in flight', async () => {
      // s05's write fails once s07 ran (a guard lets it go in any case): steps ran on while it was in flight.
      let ranOn = false;
      held.gate = async (rows) => {
        if (!rows.some((row) => row.stepName === 's05')) return;
        await orAfter(s07Ran.promise, 2_000);
        ranOn = s07HasRun;
        throw new StoreUnavailableError(inner.backend, 'appendStep', new Error('connection reset'));
      };
      const waypoint = await open('async');
      const id = runId('fail-line');
      await assert.rejects(waypoint.run(Many, { runId: id, input: {} }), { code: 'STORE_UNAVAILABLE' });
      assert.ok(ranOn, 's07 ran while the write of s05 was in flight');
      // What is stored is a prefix of the line that ends before s05 (a batch that held s05 failed whole).
      const stored = (await inner.listSteps(id)).map((row) => `${row.sequence}:${row.stepName}`);
      assert.ok(stored.length <= 5, stored.join(','));
      assert.deepEqual(
        stored,
        stored.map((_, i) => `${i + 1}:s${String(i).padStart(2, '0')}`),
      );
      assert.equal(held.landed.length, stored.length);
      held.gate = () => Promise.resolve();
      const resumed = await waypoint.run(Many, { runId: id });
      assert.equal(resumed.status, 'completed');
      assert.equal(resumed.stepsExecuted, MANY - stored.length);
      assert.equal((resumed.state as { n: number }).n, MANY);
    });

    it('writes the rows in order, chained and contiguous, at most 8 in flight, to the state a sync run reaches', async () => {
      let seed = 7;
      slowWrites(() => (seed = (seed * 48271) % 2147483647) % 6);
      const waypoint = await open('async');
      const id = runId('order');
      const result = await waypoint.run(Many, { runId: id, input: {} });
      const rows = await inner.listSteps(id);
      assert.deepEqual(
        rows.map((row) => row.sequence),
        Array.from({ length: MANY }, (_, i) => i + 1),
      );
      assert.deepEqual(
        rows.map((row) => row.stepName),
        Array.from({ length: MANY }, (_, i) => `s${String(i).padStart(2, '0')}`),
      );
      assert.ok(Math.max(...held.writes) <= 8, `rows per write: ${held.writes.join(',')}`);
      assert.ok(
        held.writes.some((n) => n > 1),
        `rows that became ready together leave together: ${held.writes.join(',')}`,
      );
      held.gate = () => Promise.resolve();
      const sync = await (await open('sync')).run(Many, { runId: runId('order-sync'), input: {} });
      assert.deepEqual({ ...result.state }, { ...sync.state });
      // Loading the run again checks every row's hash and link: nothing to run.
      const again = await waypoint.run(Many, { runId: id });
      assert.equal(again.stepsExecuted, 0);
      assert.deepEqual({ ...again.state }, { ...sync.state });
    });
  });
}
