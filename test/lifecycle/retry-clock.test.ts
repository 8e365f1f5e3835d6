import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { beforeEach, describe, it } from 'node:test';
import {
  Agent,
  MemoryCheckpointStore,
  NonRetryableError,
  Pipeline,
  Step,
  StepFailedError,
  Waypoint,
  WaypointError,
  deserialize,
  type OperationRecord,
  type RetryPolicy,
  type StepContext,
} from '../../src/index';
import { FakeClock, ManualClock, fakeTimeModule, keepAlive, until } from './fake-clock';

/**
 * Retries, backoff, jitter and timeouts on a fake clock (TOKENS.Clock): no backoff is waited for real,
 * and every failed attempt must be in the operations log with its number and error.
 */

/** How the steps below behave in the current test. */
const script = { failures: 0, seen: [] as number[], signals: [] as AbortSignal[], prepared: 0, hangFirst: false, error: (n: number): unknown => new Error(`transient ${n}`) };

beforeEach(() => Object.assign(script, { failures: 0, seen: [], signals: [], prepared: 0, hangFirst: false, error: (n: number) => new Error(`transient ${n}`) }));

/** A pipeline of `prepare` then `call` with the given step options. */
function pipeline(name: string, options: { retries?: number | RetryPolicy; timeoutMs?: number }) {
  class Caller extends Agent {
    @Step() prepare() {
      script.prepared += 1;
      return { prepared: true };
    }
    @Step(options) async call(ctx: StepContext) {
      script.seen.push(ctx.attempt);
      script.signals.push(ctx.signal);
      if (script.hangFirst && ctx.attempt === 1) {
        return new Promise<never>((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('gave up on abort')), { once: true }));
      }
      if (script.failures > 0) {
        script.failures -= 1;
        throw script.error(ctx.attempt);
      }
      return { answeredOn: ctx.attempt };
    }
  }
  @Pipeline({ name, version: '1', agents: [Caller] })
  class P {}
  return P;
}

async function setup(clock = new FakeClock()) {
  const store = new MemoryCheckpointStore();
  const waypoint = await Waypoint.create({ modules: [fakeTimeModule(clock, store)], heartbeatMs: 10 });
  return { waypoint, store, clock };
}

/** Failed-attempt records of a run: [name, step, state, error message or code]. */
async function attempts(store: MemoryCheckpointStore, runId: string, field: 'message' | 'code' = 'message'): Promise<[string, string, string, unknown][]> {
  const ops: OperationRecord[] = (await store.listOperations(runId)).filter((o) => o.name.startsWith('attempt:'));
  return ops.map((o) => [o.name, o.stepKey, o.state, deserialize<Record<string, unknown>>(o.error!)[field]]);
}

describe('retries on a fake clock', () => {
  it('backs off initialDelayMs × factor^(n-1) capped at maxDelayMs, recording every failed attempt with its number and error', async () => {
    const P = pipeline('backoff', { retries: { maxAttempts: 5, initialDelayMs: 100, factor: 3, maxDelayMs: 1_000, jitter: false } });
    const { waypoint, store, clock } = await setup();
    const t0 = clock.now().getTime();
    script.failures = 4;
    const result = await waypoint.run(P, { runId: 'backoff', input: {} });
    assert.equal(result.status, 'completed');
    assert.deepEqual(script.seen, [1, 2, 3, 4, 5]);
    assert.deepEqual(clock.sleeps, [100, 300, 900, 1_000]);
    assert.deepEqual(
      await attempts(store, 'backoff'),
      [1, 2, 3, 4].map((n) => [`attempt:${n}`, 'Caller/call', 'failed', `transient ${n}`]),
    );
    const row = (await store.listSteps('backoff'))[1];
    assert.equal(row.attempt, 5, 'the row carries the attempt that succeeded');
    assert.equal(row.startedAt.getTime(), t0 + 2_300, 'the successful attempt started after the backoffs, on the injected clock');
  });

  it('full jitter: each delay is an integer in [0, the exponential cap), driven by Math.random', async (t) => {
    const P = pipeline('jitter', { retries: { maxAttempts: 4, initialDelayMs: 100, factor: 2, maxDelayMs: 250 } });
    const draws = [0, 0.5, 0.999999];
    t.mock.method(Math, 'random', () => draws.shift() ?? 0.5);
    const { waypoint, clock } = await setup();
    script.failures = 3;
    await waypoint.run(P, { runId: 'jitter-fixed', input: {} });
    assert.deepEqual(clock.sleeps, [0, 100, 249], 'caps 100, 200, 250 scaled by 0, 0.5, 0.999999');
    t.mock.restoreAll();

    const caps = [100, 200, 250];
    for (let i = 0; i < 30; i++) {
      const run = await setup();
      script.failures = 3;
      await run.waypoint.run(P, { runId: `jitter-${i}`, input: {} });
      run.clock.sleeps.forEach((d, n) => assert.ok(Number.isInteger(d) && d >= 0 && d < caps[n], `delay ${n + 1} = ${d}, cap ${caps[n]}`));
    }
  });

  it('exhausting the attempts fails the run with a typed, stored error; resume retries from that step only', async () => {
    const P = pipeline('exhaust', { retries: 2 });
    const { waypoint, store, clock } = await setup();
    script.failures = 3;
    await assert.rejects(waypoint.run(P, { runId: 'exhaust', input: {} }), (err: unknown) => {
      assert.ok(err instanceof StepFailedError);
      assert.deepEqual([err.code, err.attempts, err.step, err.runId], ['STEP_FAILED', 3, 'Caller/call', 'exhaust']);
      assert.equal((err.cause as Error).message, 'transient 3');
      return true;
    });
    assert.equal(clock.sleeps.length, 2, 'retries: 2 means two backoffs');
    const info = (await waypoint.get('exhaust'))!;
    assert.equal(info.status, 'failed');
    assert.deepEqual([(info.error as WaypointError).code, info.leaseOwner], ['STEP_FAILED', null]);
    assert.match(info.resumeHint ?? '', /waypoint\.resume\('exhaust'\) to retry from the failed step/);
    assert.deepEqual(
      await attempts(store, 'exhaust'),
      [1, 2, 3].map((n) => [`attempt:${n}`, 'Caller/call', 'failed', `transient ${n}`]),
    );

    script.seen = [];
    const resumed = await waypoint.resume('exhaust');
    assert.deepEqual([resumed.status, resumed.stepsSkipped, resumed.stepsExecuted], ['completed', 1, 1]);
    assert.equal(script.prepared, 1, 'the step before the failure is not run again');
    assert.deepEqual(script.seen, [1], 'attempts count from 1 again in the resuming call');
    assert.equal((await attempts(store, 'exhaust')).length, 3, 'the earlier failed attempts stay in the log');
  });

  it('NonRetryableError and retryOn → false fail at once: one attempt, recorded, no backoff', async () => {
    const strict = pipeline('non-retryable', { retries: 5 });
    const picky = pipeline('retry-on', { retries: { maxAttempts: 5, retryOn: (e) => !(e instanceof TypeError) } });
    for (const [P, error, code] of [
      [strict, new NonRetryableError('card declined'), 'NON_RETRYABLE'],
      [picky, new TypeError('bad shape'), null],
    ] as const) {
      const { waypoint, store, clock } = await setup();
      script.failures = 1;
      script.seen = [];
      script.error = () => error;
      await assert.rejects(waypoint.run(P, { runId: 'once', input: {} }), (err: StepFailedError) => err.code === 'STEP_FAILED' && err.attempts === 1);
      assert.deepEqual(script.seen, [1]);
      assert.deepEqual(clock.sleeps, []);
      assert.deepEqual(await attempts(store, 'once', 'code'), [['attempt:1', 'Caller/call', 'failed', code]]);
    }
  });
});

describe('timeouts and stops during a backoff', () => {
  it("timeoutMs aborts the attempt's signal with STEP_TIMEOUT, records the attempt, and backs off on the clock", async () => {
    const P = pipeline('timeout', { timeoutMs: 25, retries: { maxAttempts: 2, initialDelayMs: 500, jitter: false } });
    const { waypoint, store, clock } = await setup();
    script.hangFirst = true;
    const started = Date.now();
    const result = await waypoint.run(P, { runId: 'timeout', input: {} });
    assert.ok(Date.now() - started < 1_000, 'only the 25 ms timeout was waited for real');
    assert.deepEqual(result.state, { prepared: true, answeredOn: 2 });
    assert.equal((script.signals[0].reason as WaypointError).code, 'STEP_TIMEOUT');
    assert.equal(script.signals[1].aborted, false);
    assert.deepEqual(clock.sleeps, [500]);
    assert.deepEqual(await attempts(store, 'timeout', 'code'), [['attempt:1', 'Caller/call', 'failed', 'STEP_TIMEOUT']]);
  });

  it('a pause during the backoff pauses the run (not failed); the failed attempt stays recorded; resume runs the step', async () => {
    const P = pipeline('pause-backoff', { retries: { maxAttempts: 3, initialDelayMs: 10_000, jitter: false } });
    const clock = new ManualClock();
    const { waypoint, store } = await setup(clock);
    script.failures = 1;
    const stop = new AbortController();
    const running = waypoint.run(P, { runId: 'pause-backoff', input: {}, signal: stop.signal });
    await until(() => clock.waiting === 1, 'the backoff to begin');
    stop.abort('SIGTERM');
    const paused = await running;
    assert.deepEqual([paused.status, paused.lastSequence], ['paused', 1]);
    assert.deepEqual(script.seen, [1], 'no attempt after the pause');
    assert.deepEqual(await attempts(store, 'pause-backoff'), [['attempt:1', 'Caller/call', 'failed', 'transient 1']]);
    const info = (await waypoint.get('pause-backoff'))!;
    assert.deepEqual([info.status, info.leaseOwner], ['paused', null]);

    const resumed = await waypoint.resume('pause-backoff');
    assert.deepEqual([resumed.status, resumed.stepsExecuted], ['completed', 1]);
    assert.deepEqual(clock.sleeps, [10_000], 'the resumed attempt succeeded without another backoff');
  });

  it('a cancel during the backoff ends the run with RUN_CANCELLED and no further attempt', async () => {
    const P = pipeline('cancel-backoff', { retries: { maxAttempts: 3, initialDelayMs: 10_000, jitter: false } });
    const clock = new ManualClock();
    const { waypoint, store } = await setup(clock);
    script.failures = 1;
    const ended = assert.rejects(keepAlive(waypoint.run(P, { runId: 'cancel-backoff', input: {} })), (err: WaypointError) => err.code === 'RUN_CANCELLED');
    await until(() => clock.waiting === 1, 'the backoff to begin');
    await waypoint.cancel('cancel-backoff', 'no longer needed');
    await ended;
    assert.deepEqual(script.seen, [1]);
    assert.equal((await store.listSteps('cancel-backoff')).length, 1);
    assert.equal((await waypoint.get('cancel-backoff'))?.status, 'cancelled');
  });
});
