import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { IsArray, IsOptional, IsString } from 'class-validator';
import { Agent, memoryStorage, Pipeline, Reducer, Step, Waypoint, type StepContext } from '../../src/index';

/*
 * A step whose update reaches a @Reducer is followed by its merge row. The run's cursor after that row is the
 * cursor after the step (the next step), as for a step without one: the merge row once reset it to the start of
 * the step's agent, so a paused run's checkpoint and views named the wrong next step.
 */

const hooks: { onStep?: (index: number) => void } = {};

class ListState {
  @IsString() subject!: string;
  @IsOptional() @IsArray() @Reducer((a: string[] = [], b: string[] = []) => [...a, ...b]) log?: string[];
}

class Writer extends Agent {
  private note(index: number) {
    hooks.onStep?.(index);
    return { log: [`step ${index}`] };
  }
  @Step() s0() {
    return this.note(0);
  }
  @Step() s1() {
    return this.note(1);
  }
  @Step() s2(ctx: StepContext<ListState>) {
    assert.ok(ctx.state.log);
    return this.note(2);
  }
  @Step() s3() {
    return this.note(3);
  }
  @Step() s4() {
    return this.note(4);
  }
}

@Pipeline({ name: 'merge-row-cursor', version: '1.0.0', state: ListState, agents: [Writer] })
class Listing {}

describe('the run cursor after a merge row', () => {
  const waypoints: Record<string, Waypoint> = {};
  before(async () => {
    waypoints.sync = await Waypoint.create({ modules: [memoryStorage()] });
    waypoints.async = await Waypoint.create({ modules: [memoryStorage()], durability: 'async' });
  });
  after(async () => {
    for (const waypoint of Object.values(waypoints)) await waypoint.close();
  });

  for (const durability of ['sync', 'async']) {
    it(`is the cursor after its step ('${durability}'): a paused run names the next step, and resumes to the whole list`, async () => {
      const waypoint = waypoints[durability];
      const runId = `cursor-${durability}`;
      const stop = new AbortController();
      hooks.onStep = (index) => {
        if (index === 2) stop.abort('test: pause');
      };
      const first = await waypoint.run(Listing, { runId, input: { subject: 's' }, signal: stop.signal });
      hooks.onStep = undefined;
      assert.equal(first.status, 'paused');
      const run = (await waypoint.store.getRun(runId))!;
      assert.deepEqual([run.cursorAgent, run.cursorStep], [0, 3]);
      const checkpoint = await waypoint.checkpoint(runId);
      assert.equal(checkpoint.current_step_index, 3);
      assert.deepEqual(checkpoint.shared_context.log, ['step 0', 'step 1', 'step 2']);
      const resumed = await waypoint.resume<ListState>(runId);
      assert.equal(resumed.status, 'completed');
      assert.deepEqual(resumed.state.log, ['step 0', 'step 1', 'step 2', 'step 3', 'step 4']);
    });
  }
});
