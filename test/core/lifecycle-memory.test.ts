import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Agent, Pipeline, Step, Waypoint, memoryStorage, type StepContext, WaypointError } from '../../src/index';

let log: string[] = [];

class Approver extends Agent {
  @Step() prepare() {
    log.push('prepare');
    return { prepared: true };
  }
  @Step() async approve(ctx: StepContext) {
    log.push('approve');
    const answer = await ctx.waitFor<{ ok: boolean }>('approval');
    return { approved: answer.ok };
  }
  @Step() async nap(ctx: StepContext) {
    await ctx.sleep(5);
    return { napped: true };
  }
}

@Pipeline({ name: 'approval', version: '1', agents: [Approver] })
class ApprovalPipeline {}

/** Called when step `two` of {@link SlowPipeline} starts (step `one` is recorded by then). */
let inTwo: (() => void) | null = null;
/** Resolves when the next run of {@link SlowPipeline} enters its step `two`: waits for the run, not for the clock. */
const untilTwo = () => new Promise<void>((resolve) => (inTwo = resolve));

class Slow extends Agent {
  @Step() async one(ctx: StepContext) {
    await new Promise((r) => setTimeout(r, 30));
    return { one: ctx.runId };
  }
  @Step() async two(ctx: StepContext) {
    inTwo?.();
    await new Promise((resolve, reject) => {
      const t = setTimeout(resolve, 5_000);
      // the abort reason, unchanged: the runtime tells a pause (a PauseRequest, not an Error) from a timeout by it
      ctx.signal.addEventListener('abort', () => (clearTimeout(t), reject(ctx.signal.reason)));
    });
    return { two: true };
  }
}

@Pipeline({ name: 'slow', version: '1', agents: [Slow] })
class SlowPipeline {}

describe('lifecycle on the memory store', () => {
  it('waits for a signal as `waiting`, then continues after waypoint.signal + resume', async () => {
    log = [];
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [ApprovalPipeline] });
    const first = await waypoint.run(ApprovalPipeline, { runId: 'w1', input: {} });
    assert.equal(first.status, 'waiting');
    assert.equal(first.stepsExecuted, 1);
    const info = await waypoint.get('w1');
    assert.equal(info?.status, 'waiting');
    assert.match(info?.resumeHint ?? '', /signal 'approval'/);
    assert.equal(await waypoint.signal('w1', 'approval', { ok: true }), true);
    assert.equal(await waypoint.signal('w1', 'approval', { ok: false }), false);
    const done = await waypoint.resume('w1');
    assert.equal(done.status, 'completed');
    assert.equal(done.state.approved, true);
    assert.equal(done.state.napped, true);
    assert.deepEqual(log, ['prepare', 'approve', 'approve']);
  });

  it('pauses at the step boundary when the run signal aborts, and resumes later', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    const controller = new AbortController();
    const inStepTwo = untilTwo();
    const running = waypoint.run(SlowPipeline, { runId: 'p1', input: {}, signal: controller.signal, gracePeriodMs: 50 });
    await inStepTwo;
    controller.abort('SIGTERM');
    const paused = await running;
    assert.equal(paused.status, 'paused');
    assert.equal(paused.lastSequence, 1);
    const info = await waypoint.get('p1');
    assert.equal(info?.status, 'paused');
    assert.equal(info?.leaseOwner, null);
    assert.match(info?.resumeHint ?? '', /SIGTERM/);
  });

  it('cancel fences out a live executor and a cancelled run is never resumed', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], heartbeatMs: 10, leaseTtlMs: 1000 });
    const inStepTwo = untilTwo();
    const ended = assert.rejects(waypoint.run(SlowPipeline, { runId: 'c1', input: {} }), (e: WaypointError) => e.code === 'RUN_CANCELLED');
    await inStepTwo;
    await waypoint.cancel('c1', 'operator');
    await ended;
    await assert.rejects(waypoint.run(SlowPipeline, { runId: 'c1' }), (e: WaypointError) => e.code === 'RUN_CANCELLED');
    const cp = await waypoint.checkpoint('c1');
    assert.equal(cp.checkpoint_sequence, 1);
  });
});

describe('one executor per run inside one process', () => {
  it('a second concurrent run() of the same run is refused with RUN_LOCKED and the effect runs once', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    const first = assert.rejects(waypoint.run(SlowPipeline, { runId: 'twice', input: {}, gracePeriodMs: 10 }), (e: WaypointError) => e.code === 'RUN_CANCELLED');
    await new Promise((r) => setTimeout(r, 10));
    await assert.rejects(waypoint.run(SlowPipeline, { runId: 'twice' }), (e: WaypointError) => e.code === 'RUN_LOCKED');
    await waypoint.cancel('twice');
    await first;
    // once the first call is over, the run id is free again in this process (cancelled runs refuse on their own)
    await assert.rejects(waypoint.run(SlowPipeline, { runId: 'twice' }), (e: WaypointError) => e.code === 'RUN_CANCELLED');
  });
});
