import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it, beforeEach } from 'node:test';
import { ContainerModule } from 'inversify';
import {
  Agent,
  MemoryCheckpointStore,
  NonRetryableError,
  Pipeline,
  Step,
  StepFailedError,
  SystemClock,
  TOKENS,
  Waypoint,
  WaypointError,
  type Clock,
  type Logger,
  type StepContext,
} from '../../src/index';
import { backoffDelay } from '../../src/core/step/retry';
import { resolveRetry } from '../../src/core/plan/plan-reader';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** Records every backoff the runtime asks for, and waits 0 ms instead. */
class RecordingClock implements Clock {
  readonly sleeps: number[] = [];
  private readonly real = new SystemClock();
  now(): Date {
    return this.real.now();
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    this.sleeps.push(ms);
    return this.real.sleep(0, signal);
  }
}

async function setup() {
  const store = new MemoryCheckpointStore();
  const clock = new RecordingClock();
  const waypoint = await Waypoint.create({
    modules: [
      new ContainerModule(({ bind }) => {
        bind(TOKENS.CheckpointStore).toConstantValue(store);
        bind(TOKENS.Logger).toConstantValue(silent);
        bind(TOKENS.Clock).toConstantValue(clock);
      }),
    ],
  });
  return { waypoint, store, clock };
}

let failures = 0;
let attempts: number[] = [];
let signals: AbortSignal[] = [];
let hangFirst = false;

beforeEach(() => {
  failures = 0;
  attempts = [];
  signals = [];
  hangFirst = false;
});

class Flaky extends Agent {
  @Step({ retries: { maxAttempts: 3, initialDelayMs: 5, factor: 3, jitter: false } })
  fetch(ctx: StepContext) {
    attempts.push(ctx.attempt);
    if (failures > 0) {
      failures -= 1;
      return Promise.reject(new Error(`transient ${ctx.attempt}`));
    }
    return { fetched: ctx.attempt };
  }
}
@Pipeline({ name: 'retry-flaky', version: '1', agents: [Flaky] })
class FlakyPipeline {}

class Jittered extends Agent {
  @Step({ retries: 2 })
  fetch(ctx: StepContext) {
    attempts.push(ctx.attempt);
    if (failures-- > 0) return Promise.reject(new Error('transient'));
    return { ok: true };
  }
}
@Pipeline({ name: 'retry-jittered', version: '1', agents: [Jittered] })
class JitteredPipeline {}

class Strict extends Agent {
  @Step({ retries: 3 })
  charge(ctx: StepContext) {
    attempts.push(ctx.attempt);
    return Promise.reject(new NonRetryableError('card declined'));
  }
}
@Pipeline({ name: 'retry-nonretryable', version: '1', agents: [Strict] })
class StrictPipeline {}

class Picky extends Agent {
  @Step({ retries: { maxAttempts: 5, initialDelayMs: 1, retryOn: (e) => !(e instanceof TypeError) } })
  parse(ctx: StepContext) {
    attempts.push(ctx.attempt);
    return Promise.reject(new TypeError('bad shape'));
  }
}
@Pipeline({ name: 'retry-retryon', version: '1', agents: [Picky] })
class PickyPipeline {}

class Hopeless extends Agent {
  @Step({ retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } })
  fetch(ctx: StepContext) {
    attempts.push(ctx.attempt);
    return Promise.reject(new Error(`down ${ctx.attempt}`));
  }
}
@Pipeline({ name: 'retry-exhausted', version: '1', agents: [Hopeless] })
class HopelessPipeline {}

/** Waits until its signal aborts on the first attempt (when hangFirst), answers at once otherwise. */
function slow(ctx: StepContext): Promise<Record<string, unknown>> {
  attempts.push(ctx.attempt);
  signals.push(ctx.signal);
  if (hangFirst && ctx.attempt === 1) {
    return new Promise((_, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('aborted by signal')), { once: true }));
  }
  return Promise.resolve({ answeredOn: ctx.attempt });
}

class SlowThenFast extends Agent {
  @Step({ timeoutMs: 20, retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } })
  async ask(ctx: StepContext) {
    return slow(ctx);
  }
}
@Pipeline({ name: 'retry-timeout', version: '1', agents: [SlowThenFast] })
class TimeoutPipeline {}

class AlwaysSlow extends Agent {
  @Step({ timeoutMs: 15 })
  async ask(ctx: StepContext) {
    return slow(ctx);
  }
}
@Pipeline({ name: 'retry-timeout-fail', version: '1', agents: [AlwaysSlow] })
class TimeoutFailPipeline {}

describe('step retries', () => {
  it('a step that fails twice then succeeds is recorded with attempt=3, after the policy backoffs', async () => {
    const { waypoint, store, clock } = await setup();
    failures = 2;
    const result = await waypoint.run(FlakyPipeline, { runId: 'flaky', input: {} });
    assert.equal(result.status, 'completed');
    assert.deepEqual(result.state, { fetched: 3 });
    assert.deepEqual(attempts, [1, 2, 3]);
    const [row] = await store.listSteps('flaky');
    assert.equal(row.attempt, 3);
    assert.equal(row.stepName, 'fetch');
    assert.deepEqual(clock.sleeps, [5, 15], 'initialDelayMs, then * factor');
    const cp = await waypoint.checkpoint('flaky');
    assert.equal(cp.completed_steps.length, 1);
  });

  it('retries: n means n retries (n + 1 attempts) with jittered delays below the exponential cap', async () => {
    const { waypoint, store, clock } = await setup();
    failures = 2;
    const result = await waypoint.run(JitteredPipeline, { runId: 'jitter', input: {} });
    assert.equal(result.status, 'completed');
    assert.deepEqual(attempts, [1, 2, 3]);
    assert.equal((await store.listSteps('jitter'))[0].attempt, 3);
    assert.equal(clock.sleeps.length, 2);
    assert.ok(clock.sleeps[0] >= 0 && clock.sleeps[0] < 200, `first delay ${clock.sleeps[0]}`);
    assert.ok(clock.sleeps[1] >= 0 && clock.sleeps[1] < 400, `second delay ${clock.sleeps[1]}`);
  });

  it('NonRetryableError fails at once: STEP_FAILED, run failed, error stored', async () => {
    const { waypoint, store, clock } = await setup();
    await assert.rejects(waypoint.run(StrictPipeline, { runId: 'strict', input: {} }), (err: unknown) => {
      assert.ok(err instanceof StepFailedError);
      assert.equal(err.code, 'STEP_FAILED');
      assert.equal(err.attempts, 1);
      assert.equal(err.step, 'Strict/charge');
      assert.equal(err.runId, 'strict');
      assert.ok(err.message.includes("Step 'Strict/charge' of run 'strict' failed after 1 attempt(s): card declined"), err.message);
      assert.ok((err.cause as Error) instanceof NonRetryableError);
      return true;
    });
    assert.deepEqual(attempts, [1]);
    assert.deepEqual(clock.sleeps, []);
    const info = await waypoint.get('strict');
    assert.equal(info!.status, 'failed');
    const stored = info!.error as { name: string; code: string; message: string };
    assert.equal(stored.code, 'STEP_FAILED');
    assert.equal(stored.name, 'StepFailedError');
    assert.ok(stored.message.includes('card declined'));
    assert.ok(info!.resumeHint?.includes("waypoint.resume('strict')"));
    assert.deepEqual(await store.listSteps('strict'), []);
    assert.equal(info!.leaseOwner, null, 'the lease is released');
  });

  it('retryOn returning false fails at once', async () => {
    const { waypoint } = await setup();
    await assert.rejects(waypoint.run(PickyPipeline, { runId: 'picky', input: {} }), (err: StepFailedError) => err.code === 'STEP_FAILED' && err.attempts === 1);
    assert.deepEqual(attempts, [1]);
  });

  it('exhausted attempts: STEP_FAILED with the attempt count and the last cause', async () => {
    const { waypoint } = await setup();
    await assert.rejects(waypoint.run(HopelessPipeline, { runId: 'hopeless', input: {} }), (err: unknown) => {
      assert.ok(err instanceof StepFailedError);
      assert.equal(err.attempts, 2);
      assert.ok(err.message.includes('failed after 2 attempt(s): down 2'), err.message);
      return true;
    });
    assert.deepEqual(attempts, [1, 2]);
    assert.equal((await waypoint.get('hopeless'))!.status, 'failed');
  });
});

describe('step timeouts', () => {
  it("timeoutMs aborts the attempt's ctx.signal and counts as a failed attempt", async () => {
    const { waypoint, store } = await setup();
    hangFirst = true;
    const started = Date.now();
    const result = await waypoint.run(TimeoutPipeline, { runId: 'timeout', input: {} });
    assert.ok(Date.now() - started < 2000);
    assert.equal(result.status, 'completed');
    assert.deepEqual(result.state, { answeredOn: 2 });
    assert.deepEqual(attempts, [1, 2]);
    assert.equal(signals[0].aborted, true);
    const reason = signals[0].reason as WaypointError;
    assert.equal(reason.code, 'STEP_TIMEOUT');
    assert.ok(reason.message.includes("Step 'SlowThenFast/ask' of run 'timeout' exceeded its timeout of 20 ms"), reason.message);
    assert.notEqual(signals[0], signals[1], 'each attempt gets its own signal');
    assert.equal(signals[1].aborted, false);
    assert.equal((await store.listSteps('timeout'))[0].attempt, 2);
  });

  it('a timeout on the last attempt fails the step with STEP_FAILED caused by STEP_TIMEOUT', async () => {
    const { waypoint } = await setup();
    hangFirst = true;
    await assert.rejects(waypoint.run(TimeoutFailPipeline, { runId: 'timeout-fail', input: {} }), (err: unknown) => {
      assert.ok(err instanceof StepFailedError);
      assert.equal(err.attempts, 1);
      assert.equal((err.cause as WaypointError).code, 'STEP_TIMEOUT');
      assert.ok(err.message.includes('exceeded its timeout of 15 ms'), err.message);
      return true;
    });
    assert.equal(signals[0].aborted, true);
    assert.equal((await waypoint.get('timeout-fail'))!.status, 'failed');
  });
});

describe('backoffDelay', () => {
  const policy = (over: Parameters<typeof resolveRetry>[0] & object) => resolveRetry({ maxAttempts: 10, ...over });

  it('without jitter: initialDelayMs * factor^(n-1), capped at maxDelayMs', () => {
    const p = policy({ initialDelayMs: 100, factor: 2, maxDelayMs: 500, jitter: false });
    assert.deepEqual(
      [1, 2, 3, 4, 5, 50].map((n) => backoffDelay(p, n)),
      [100, 200, 400, 500, 500, 500],
    );
    const p3 = policy({ initialDelayMs: 10, factor: 3, maxDelayMs: 10_000, jitter: false });
    assert.deepEqual(
      [1, 2, 3].map((n) => backoffDelay(p3, n)),
      [10, 30, 90],
    );
    const flat = policy({ initialDelayMs: 7, factor: 1, jitter: false });
    assert.deepEqual(
      [1, 5, 9].map((n) => backoffDelay(flat, n)),
      [7, 7, 7],
    );
    const capped = policy({ initialDelayMs: 1000, maxDelayMs: 50, jitter: false });
    assert.equal(backoffDelay(capped, 1), 50);
  });

  it('does not overflow to NaN/Infinity for very large attempt numbers', () => {
    for (const initialDelayMs of [0, 100]) {
      const p = policy({ initialDelayMs, factor: 2, maxDelayMs: 500, jitter: false });
      const d = backoffDelay(p, 5000);
      assert.ok(Number.isFinite(d) && d >= 0 && d <= 500, `initialDelayMs ${initialDelayMs}: delay ${d}`);
    }
  });

  it('with jitter: an integer in [0, cap) driven by the injected random', () => {
    const p = policy({ initialDelayMs: 100, factor: 2, maxDelayMs: 500, jitter: true });
    assert.equal(
      backoffDelay(p, 3, () => 0),
      0,
    );
    assert.equal(
      backoffDelay(p, 3, () => 0.5),
      200,
    );
    assert.equal(
      backoffDelay(p, 3, () => 0.999999),
      399,
    );
    assert.equal(
      backoffDelay(p, 10, () => 0.999999),
      499,
    );
    for (let i = 0; i < 200; i++) {
      const d = backoffDelay(p, 2);
      assert.ok(Number.isInteger(d) && d >= 0 && d < 200, `delay ${d}`);
    }
  });

  it('defaults: 200 ms initial, factor 2, cap 30 s, jitter on', () => {
    const p = resolveRetry(3);
    assert.equal(p.maxAttempts, 4);
    assert.equal(
      backoffDelay(p, 1, () => 0.5),
      100,
    );
    assert.equal(
      backoffDelay(p, 2, () => 0.5),
      200,
    );
    assert.equal(backoffDelay({ ...p, jitter: false }, 20), 30_000);
  });
});

let syncThrows = 0;

class SyncThrowAgent extends Agent {
  // Written without `async`: the first attempt throws synchronously, the second returns.
  @Step({ timeoutMs: 60_000, retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } })
  draft(): Record<string, unknown> {
    syncThrows += 1;
    if (syncThrows === 1) throw new Error('sync failure');
    return { drafted: true };
  }
}

@Pipeline({ name: 'sync-throw', version: '1', agents: [SyncThrowAgent] })
class SyncThrowPipeline {}

describe('a step method that throws synchronously', () => {
  it('fails its attempt like a rejection: retried, and its timeout timer cleared', async () => {
    const { waypoint } = await setup();
    const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timeouts();
    const result = await waypoint.run(SyncThrowPipeline, { runId: 'sync-1', input: {} });
    assert.equal(result.status, 'completed');
    assert.equal(syncThrows, 2);
    // Each attempt armed a 60 s timeout; a synchronous throw used to leave the first one armed.
    assert.equal(timeouts(), before);
    await waypoint.close();
  });
});
