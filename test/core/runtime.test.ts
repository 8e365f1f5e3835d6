import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { IsInt, IsString, Min } from 'class-validator';
import { Agent, Pipeline, Step, Waypoint, memoryStorage, type StepContext, WaypointError } from '../../src/index';

class CountState {
  @IsString() name!: string;
  @IsInt() @Min(0) count = 0;
  log: string[] = [];
}

let calls: string[] = [];

class Counter extends Agent<{ seen: number }> {
  override memory = { seen: 0 };
  @Step() first(ctx: StepContext<CountState>) {
    calls.push('first');
    this.memory.seen += 1;
    return { count: ctx.state.count + 1, log: [...ctx.state.log, 'first'] };
  }
  @Step() second(ctx: StepContext<CountState>) {
    calls.push('second');
    this.memory.seen += 1;
    return { count: ctx.state.count + 10, log: [...ctx.state.log, 'second'] };
  }
}

let failOnce = true;
class Finisher extends Agent {
  @Step({ retries: 2, timeoutMs: 1000 }) finish(ctx: StepContext<CountState>) {
    calls.push('finish');
    if (failOnce) {
      failOnce = false;
      return Promise.reject(new Error('flaky'));
    }
    return { log: [...ctx.state.log, `done:${ctx.state.count}`] };
  }
}

@Pipeline({ name: 'counter', version: '1.0.0', state: CountState, agents: [Counter, Finisher] })
class CounterPipeline {}

describe('runtime on the memory store', () => {
  it('runs every step once, merges updates in order, and returns the final state', async () => {
    calls = [];
    failOnce = true;
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    const result = await waypoint.run<CountState>(CounterPipeline, { runId: 'r1', input: { name: 'x' } });
    assert.equal(result.status, 'completed');
    assert.equal(result.state.count, 11);
    assert.deepEqual(result.state.log, ['first', 'second', 'done:11']);
    assert.deepEqual(calls, ['first', 'second', 'finish', 'finish']);
    assert.equal(result.stepsExecuted, 3);
    assert.equal(result.stepsSkipped, 0);
    const again = await waypoint.run<CountState>(CounterPipeline, { runId: 'r1' });
    assert.equal(again.stepsExecuted, 0);
    assert.equal(again.stepsSkipped, 3);
    assert.deepEqual(again.state.log, ['first', 'second', 'done:11']);
    assert.equal(calls.length, 4);
    const cp = await waypoint.checkpoint('r1');
    assert.equal(cp.checkpoint_sequence, 3);
    assert.equal(cp.is_terminal, true);
    assert.deepEqual(cp.agent_memory_snapshots, { Counter: { seen: 2 } });
    const mid = await waypoint.checkpoint('r1', 1);
    assert.equal(mid.shared_context.count, 1);
    assert.equal(mid.current_agent_index, 0);
    assert.equal(mid.current_step_index, 1);
    const all = await waypoint.checkpoints('r1');
    assert.deepEqual(
      all.map((c) => c.checkpoint_sequence),
      [0, 1, 2, 3],
    );
    assert.deepEqual(all[1], mid);
    assert.deepEqual(all[3], cp);
    assert.deepEqual(
      all[2].completed_steps.map((s) => s.step_name),
      ['first', 'second'],
    );
    const before = await waypoint.checkpoint('r1', 0);
    assert.deepEqual(all[0], before);
    assert.deepEqual(before.shared_context, { name: 'x', count: 0, log: [] });
    assert.equal(before.completed_steps.length, 0);
  });

  it('rejects invalid input with the failing properties and writes nothing', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    await assert.rejects(waypoint.run(CounterPipeline, { runId: 'bad', input: { name: 42, count: -1 } }), (err: WaypointError & { issues: { property: string }[] }) => {
      assert.equal(err.code, 'INVALID_STATE');
      assert.deepEqual(err.issues.map((i) => i.property).sort(), ['count', 'name']);
      return true;
    });
    assert.equal(await waypoint.get('bad'), null);
  });
});

let mutationAttempts = 0;
class Mutator extends Agent {
  @Step({ retries: 3 }) tamper(ctx: StepContext<CountState>) {
    mutationAttempts++;
    (ctx.state as { count: number }).count = 99;
    return {};
  }
}
@Pipeline({ name: 'mutator', version: '1', state: CountState, agents: [Mutator] })
class MutatorPipeline {}

class Pusher extends Agent {
  @Step({ retries: 3 }) append(ctx: StepContext<CountState>) {
    mutationAttempts++;
    ctx.state.log.push('x');
    return {};
  }
}
@Pipeline({ name: 'pusher', version: '1', state: CountState, agents: [Pusher] })
class PusherPipeline {}

describe('the shared state is read-only for steps', () => {
  it('assigning to ctx.state fails the step at once with STATE_MUTATED, naming run and step, not retried', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    mutationAttempts = 0;
    await assert.rejects(waypoint.run(MutatorPipeline, { runId: 'm', input: { name: 'x' } }), (e: WaypointError) => {
      assert.equal(e.code, 'STATE_MUTATED');
      assert.match(e.message, /^Step 'Mutator\/tamper' of run 'm' tried to change the shared state in place \(it set 'count'\)/);
      assert.match(e.message, /return the change from the step instead/);
      assert.doesNotMatch(e.message, /(?<!\.)\.\.(?!\.)/, 'no doubled period');
      return true;
    });
    assert.equal(mutationAttempts, 1, 'a programming error is not retried');
    assert.equal((await waypoint.get('m'))?.status, 'failed');
    assert.equal((await waypoint.checkpoint('m')).shared_context.count, 0);
  });

  it('a push onto a list in ctx.state (a frozen value) is STATE_MUTATED too, not retried', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    mutationAttempts = 0;
    await assert.rejects(waypoint.run(PusherPipeline, { runId: 'p', input: { name: 'x' } }), (e: WaypointError) => {
      assert.equal(e.code, 'STATE_MUTATED');
      assert.match(e.message, /Step 'Pusher\/append' of run 'p'/);
      return true;
    });
    assert.equal(mutationAttempts, 1);
    assert.deepEqual((await waypoint.checkpoint('p')).shared_context.log, []);
  });
});

class Upstream extends Agent {
  @Step({ retries: 1 }) call() {
    throw new Error('upstream answered 503.');
  }
}
@Pipeline({ name: 'upstream', version: '1', agents: [Upstream] })
class UpstreamPipeline {}

describe('error messages read as one sentence each', () => {
  it('a cause that ends with a period is not followed by a second one', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    await assert.rejects(waypoint.run(UpstreamPipeline, { runId: 'u', input: {} }), (e: WaypointError) => {
      assert.equal(e.code, 'STEP_FAILED');
      assert.match(e.message, /^Step 'Upstream\/call' of run 'u' failed after 2 attempt\(s\): upstream answered 503\. Fix the cause/);
      assert.doesNotMatch(e.message, /(?<!\.)\.\.(?!\.)/);
      return true;
    });
  });
});
