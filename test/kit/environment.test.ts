import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { IsOptional, IsString } from 'class-validator';
import { Agent, Pipeline, Step, type StepContext } from '../../src/index';
import { testEnvironment } from '../../src/testing/index';

const DAY = 86_400_000;

class ReminderState {
  @IsString() customer!: string;
  @IsOptional() @IsString() reminded?: string;
}

class Reminder extends Agent {
  @Step()
  async wait(ctx: StepContext<ReminderState>) {
    await ctx.sleep(DAY);
    return { reminded: `${ctx.state.customer} after a day` };
  }
}

@Pipeline({ name: 'kit-env-reminder', version: '1.0.0', state: ReminderState, agents: [Reminder] })
class DayLongReminder {}

class ApprovalState {
  @IsString() request!: string;
  @IsOptional() @IsString() decision?: string;
}

class Approvals extends Agent {
  @Step()
  async approve(ctx: StepContext<ApprovalState>) {
    const manager = await ctx.waitFor<{ by: string }>('manager');
    const finance = await ctx.waitFor<{ by: string }>('finance');
    return { decision: `${ctx.state.request} approved by ${manager.by} and ${finance.by}` };
  }
}

@Pipeline({ name: 'kit-env-approval', version: '1.0.0', state: ApprovalState, agents: [Approvals] })
class TwoSignalApproval {}

describe('testEnvironment', () => {
  it('runs a day-long ctx.sleep by moving its clock: the step ends a day later on the clock, the sleep recorded', async () => {
    const env = await testEnvironment();
    const startedAt = env.clock.now().getTime();
    env.start(DayLongReminder, { runId: 'reminder-1', input: { customer: 'ada' } });
    const result = await env.runUntil('reminder-1', 'completed');
    assert.equal(result.state.reminded, 'ada after a day');
    assert.ok(env.clock.now().getTime() - startedAt >= DAY, `the clock moved ${env.clock.now().getTime() - startedAt} ms`);
    assert.deepEqual(
      (await env.steps('reminder-1')).map((s) => s.step),
      ['Reminder/wait'],
    );
    assert.deepEqual(
      (await env.effects('reminder-1')).map((e) => [e.name, e.state]),
      [['waypoint:sleep', 'committed']],
    );
    await env.close();
  });

  it('with the clock not advanced, the sleep has not ended: advance(ms) ends it', async () => {
    const env = await testEnvironment();
    env.start(DayLongReminder, { runId: 'reminder-2', input: { customer: 'bo' } });
    while (env.clock.pending === 0) await new Promise((resolve) => setImmediate(resolve));
    await env.advance(DAY - 1);
    assert.equal(env.clock.pending, 1, 'a millisecond early, the step still sleeps');
    await env.advance(1);
    const result = await env.runUntil('reminder-2', 'completed');
    assert.equal(result.state.reminded, 'bo after a day');
    await env.close();
  });

  it('skipSleeps: the sleep moves the clock by itself', async () => {
    const env = await testEnvironment({ skipSleeps: true });
    env.start(DayLongReminder, { runId: 'reminder-3', input: { customer: 'cy' } });
    await env.runUntil('reminder-3', 'completed');
    assert.equal(env.clock.pending, 0);
    await env.close();
  });

  it('drives a two-signal approval: waiting for the manager, then for finance, then completed', async () => {
    const env = await testEnvironment({ pipelines: [TwoSignalApproval] });
    env.start(TwoSignalApproval, { runId: 'approval-1', input: { request: 'laptop' } });
    const first = await env.runUntil('approval-1', 'waiting');
    assert.equal(first.status, 'waiting');
    assert.match((await env.waypoint.get('approval-1'))!.resumeHint ?? '', /signal 'manager'/);
    await env.signal('approval-1', 'manager', { by: 'mia' });
    await env.runUntil('approval-1', 'waiting');
    assert.match((await env.waypoint.get('approval-1'))!.resumeHint ?? '', /signal 'finance'/);
    await assert.rejects(env.runUntil('approval-1', 'completed'), { code: 'KIT_RUN_STUCK' });
    await env.signal('approval-1', 'finance', { by: 'fred' });
    const done = await env.runUntil('approval-1', 'completed');
    assert.equal(done.state.decision, 'laptop approved by mia and fred');
    await env.close();
  });
  it('a lease left by a dead worker times out on the test clock: the run is refused before, taken over after advance(ttl)', async () => {
    const env = await testEnvironment({ pipelines: [DayLongReminder] });
    // A run as a worker left it when it died holding the lease (its input copied from a run this environment made).
    env.start(DayLongReminder, { runId: 'template', input: { customer: 'dee' } });
    await env.runUntil('template', 'completed');
    const template = (await env.waypoint.store.getRun('template'))!;
    const store = env.waypoint.store;
    await store.createRun({ runId: 'orphan', pipelineName: template.pipelineName, pipelineVersion: template.pipelineVersion, input: template.input, metadata: '{}' });
    assert.ok(await store.acquireLease('orphan', 'dead-worker', 30_000), 'the dead worker held the lease');
    const wallStart = Date.now();
    await assert.rejects(env.waypoint.resume('orphan'), { code: 'RUN_LOCKED' });
    await env.advance(30_001);
    const result = await env.runUntil('orphan', 'completed');
    assert.equal(result.state.reminded, 'dee after a day');
    assert.ok(Date.now() - wallStart < 30_000, 'the lease timed out on the test clock, not in real time');
    await env.close();
  });
});
