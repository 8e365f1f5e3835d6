import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Agent, MemoryCheckpointStore, Pipeline, Step, Waypoint, WaypointError, deserialize, type StepContext } from '../../src/index';
import { FakeClock, fakeTimeModule } from './fake-clock';

/**
 * `ctx.sleep` and `ctx.waitFor` on a fake clock (TOKENS.Clock): what is recorded, how much is slept,
 * when a wait times out, and what a person can still do with a run whose wait timed out.
 */

class Sleeper extends Agent {
  @Step() async once(ctx: StepContext) {
    await ctx.sleep(5_000);
    return { once: true };
  }
}
@Pipeline({ name: 'sleep-once', version: '1', agents: [Sleeper] })
class SleepOnce {}

class TwoNaps extends Agent {
  @Step() async first(ctx: StepContext) {
    await ctx.sleep(100);
    await ctx.sleep(200);
    return { first: true };
  }
  @Step() async second(ctx: StepContext) {
    await ctx.sleep(300);
    return { second: true };
  }
}
@Pipeline({ name: 'sleep-many', version: '1', agents: [TwoNaps] })
class SleepMany {}

let approvals: unknown[] = [];
class Approver extends Agent {
  @Step() async approve(ctx: StepContext) {
    approvals.push(await ctx.waitFor('approval', { timeoutMs: 60_000 }));
    return { approved: true };
  }
}
@Pipeline({ name: 'approval-timeout', version: '1', agents: [Approver] })
class ApprovalTimeout {}

async function setup() {
  const clock = new FakeClock();
  const store = new MemoryCheckpointStore();
  const waypoint = await Waypoint.create({ modules: [fakeTimeModule(clock, store)], pipelines: [ApprovalTimeout] });
  return { waypoint, store, clock };
}

/** A run whose approval wait began, then timed out on the fake clock: `failed`. */
async function timedOutRun(runId: string) {
  const world = await setup();
  approvals = [];
  assert.equal((await world.waypoint.run(ApprovalTimeout, { runId, input: {} })).status, 'waiting');
  world.clock.advance(60_001);
  await assert.rejects(world.waypoint.resume(runId), (err: WaypointError) => err.code === 'STEP_FAILED');
  assert.equal((await world.waypoint.get(runId))?.status, 'failed');
  return world;
}

describe('durable sleep and waits on a fake clock', () => {
  it('ctx.sleep records its wake-up time once and sleeps until it on the clock', async () => {
    const { waypoint, store, clock } = await setup();
    const t0 = clock.now().getTime();
    const result = await waypoint.run(SleepOnce, { runId: 'nap', input: {} });
    assert.equal(result.status, 'completed');
    assert.deepEqual(clock.sleeps, [5_000]);
    const ops = (await store.listOperations('nap')).filter((o) => o.name === 'waypoint:sleep');
    assert.deepEqual(
      ops.map((o) => [o.state, deserialize(o.result!)]),
      [['committed', t0 + 5_000]],
    );
  });

  it('every ctx.sleep call sleeps its own time: two in one step, and one in a later step', async () => {
    // Today all ctx.sleep calls of a run share one operation key ('waypoint:sleep'), so the second and
    // third calls reuse the first wake-up time and do not sleep at all.
    const { waypoint, clock } = await setup();
    const result = await waypoint.run(SleepMany, { runId: 'naps', input: {} });
    assert.equal(result.status, 'completed');
    assert.deepEqual(clock.sleeps, [100, 200, 300]);
  });

  it('waitFor timeoutMs counts from when the wait first began, across resumes, on the clock', async () => {
    const { waypoint, clock } = await setup();
    approvals = [];
    assert.equal((await waypoint.run(ApprovalTimeout, { runId: 'patient', input: {} })).status, 'waiting');
    clock.advance(59_000);
    assert.equal((await waypoint.resume('patient')).status, 'waiting', 'not yet timed out after 59 s');
    clock.advance(1_000);
    await assert.rejects(waypoint.resume('patient'), (err: WaypointError) => {
      assert.equal(err.code, 'STEP_FAILED');
      assert.equal((err.cause as WaypointError).code, 'WAIT_TIMEOUT');
      assert.match(err.message, /waited 60000 ms for signal 'approval', which never came/);
      return true;
    });
    const info = (await waypoint.get('patient'))!;
    assert.equal(info.status, 'failed');
    assert.match(info.resumeHint ?? '', /waypoint\.resume\('patient'\)/);
  });

  it('a run failed by a wait timeout can still be approved late: signal is accepted and resume continues', async () => {
    // The failed status is resumable (run-status.ts: failed → running), and its hint says "fix the
    // cause, then resume". For a timed-out wait the fix is the signal, which waypoint.signal refuses
    // today (RUN_FINISHED), leaving resume to time out again at once, forever.
    const { waypoint } = await timedOutRun('late');
    assert.equal(await waypoint.signal('late', 'approval', { ok: true }), true);
    const result = await waypoint.resume('late');
    assert.equal(result.status, 'completed');
    assert.deepEqual(approvals, [{ ok: true }]);
  });

  it('a failed run can be cancelled, so that nobody resumes it by accident', async () => {
    // run-status.ts allows failed → cancelled, but every store's cancelRun skips failed runs and
    // waypoint.cancel then throws INVALID_TRANSITION.
    const { waypoint } = await timedOutRun('abandon');
    const info = await waypoint.cancel('abandon', 'approver left the company');
    assert.equal(info.status, 'cancelled');
    await assert.rejects(waypoint.resume('abandon'), (err: WaypointError) => err.code === 'RUN_CANCELLED');
  });
});

class LateGate extends Agent {
  @Step() async gate(ctx: StepContext) {
    return { got: await ctx.waitFor<number>('go') };
  }
}
@Pipeline({ name: 'late-signal', version: '1', agents: [LateGate] })
class LateSignal {}

describe('a signal delivered while the run suspends', () => {
  it('is taken by the suspending execution itself: the run goes on instead of waiting for a signal it has', async () => {
    const store = new MemoryCheckpointStore();
    const waypoint = await Waypoint.create({ modules: [fakeTimeModule(new FakeClock(), store)], pipelines: [LateSignal] });
    const updateRun = store.updateRun.bind(store);
    let delivered = false;
    // The signal lands after the step found no signal and before the run row says `waiting`: nobody
    // else would wake the run (a waker that looks now sees it still running).
    store.updateRun = async (runId, patch, fence) => {
      if (patch.status === 'waiting' && !delivered) {
        delivered = true;
        assert.equal(await waypoint.signal(runId, 'go', 42), true);
        assert.equal((await store.getRun(runId))?.status, 'running');
      }
      return updateRun(runId, patch, fence);
    };
    const result = await waypoint.run(LateSignal, { runId: 'late-1', input: {} });
    assert.ok(delivered);
    assert.equal(result.status, 'completed');
    assert.equal((result.state as { got?: number }).got, 42);
  });
});
