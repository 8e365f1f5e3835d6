import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Agent, Pipeline, Step, Waypoint, memoryStorage } from '../../src/index';
import { BoundaryYield } from '../../src/core/flow/boundary-yield';

/** One agent with `steps` steps that return at once: on the memory store nothing in a step reaches the event loop. */
function quickPipeline(name: string, steps: number) {
  class Quick extends Agent {}
  for (let i = 0; i < steps; i++) {
    const method = function () {
      return Promise.resolve({ [`k${i % 10}`]: i });
    };
    Object.defineProperty(Quick.prototype, `s${i}`, { value: method, writable: true, configurable: true });
    Step()(Quick.prototype, `s${i}`, Object.getOwnPropertyDescriptor(Quick.prototype, `s${i}`)!);
  }
  const pipeline = { [name]: class {} }[name];
  Pipeline({ name, version: '1', agents: [Quick] })(pipeline);
  return pipeline;
}

describe('BoundaryYield (when a run lets the event loop turn between steps)', () => {
  it('is not due until everyMs have passed since it was made or last turned', async () => {
    let now = 100;
    const boundary = new BoundaryYield(1, () => now);
    assert.equal(boundary.due(), false);
    now = 100.9;
    assert.equal(boundary.due(), false, 'less than a millisecond: no turn');
    now = 101;
    assert.equal(boundary.due(), true);
    await boundary.turn();
    assert.equal(boundary.due(), false, 'turning resets it');
    now = 102.5;
    assert.equal(boundary.due(), true);
  });

  it('turn() lets callbacks queued on the event loop before it run', async () => {
    const boundary = new BoundaryYield(1, () => 0);
    let ran = false;
    setImmediate(() => (ran = true));
    await boundary.turn();
    assert.equal(ran, true);
  });

  it('a timer that becomes due during a run of quick steps is seen before the run ends (it pauses the run)', async () => {
    const steps = 3000;
    const P = quickPipeline('yield_quick', steps);
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [P] });
    const controller = new AbortController();
    // Due after 1 ms: only a turn of the event loop during the run can fire it before the 3,000 steps end.
    setTimeout(() => controller.abort(), 0);
    const result = await waypoint.run(P, { runId: 'yield-1', input: {}, signal: controller.signal });
    assert.equal(result.status, 'paused');
    assert.ok(result.stepsExecuted < steps, `paused after ${result.stepsExecuted} of ${steps} steps`);
    const resumed = await waypoint.resume('yield-1');
    assert.equal(resumed.status, 'completed');
    assert.equal(resumed.stepsExecuted + result.stepsExecuted, steps, 'no step runs twice');
  });
});
