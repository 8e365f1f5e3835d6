import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Agent, NonRetryableError, Pipeline, Step, Waypoint, memoryStorage, runProgress } from '../../src/index';
import { readPlan } from '../../src/core/plan/plan-reader';
import { straightLineProgress } from '../../src/core/history/run-progress';

// loadRunProgress reads no rows for a straight line: its figure from the cursor must be the rows' figure.
class LineA extends Agent {
  @Step() one() {
    return { a: 1 };
  }
  @Step() two() {
    return { b: 2 };
  }
}
class LineB extends Agent {
  @Step() three() {
    return { c: 3 };
  }
  @Step() five() {
    if (lineFails) throw new NonRetryableError('down');
    return { e: 5 };
  }
}
let lineFails = true;
@Pipeline({ name: 'progress-line', version: '1', agents: [LineA, LineB] })
class Line {}

describe('a straight line: the cursor alone gives the figure the rows give', () => {
  it('mid-way (failed at its last step) and completed', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [Line] });
    const plan = readPlan(Line);
    assert.equal(plan.linear, true, 'a straight line (a `when` would make it a tree)');
    lineFails = true;
    await assert.rejects(waypoint.run(Line, { runId: 'line', input: {} }));
    let loaded = (await waypoint.store.loadRun('line'))!;
    assert.deepEqual(straightLineProgress(loaded.run, plan), runProgress(loaded.run, loaded.steps, plan));
    assert.deepEqual(straightLineProgress(loaded.run, plan), { recorded: 3, planned: 4 });
    assert.deepEqual((await waypoint.get('line'))?.progress, { recorded: 3, planned: 4 });
    lineFails = false;
    await waypoint.resume('line');
    loaded = (await waypoint.store.loadRun('line'))!;
    assert.deepEqual(straightLineProgress(loaded.run, plan), runProgress(loaded.run, loaded.steps, plan));
    assert.deepEqual((await waypoint.get('line'))?.progress, { recorded: 4, planned: 4 });
    await waypoint.close();
  });
});
