import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { IsNumber, IsOptional, IsString } from 'class-validator';
import { Agent, memoryStorage, Pipeline, sqliteStorage, Step, Waypoint, type StepContext } from '../../src/index';
import { RESUME_BASE_EVERY, resumeBaseKey } from '../../src/core/history/resume-base';
import { PathSet } from '../../src/core/history/path-runs';
import { tempSqlitePath } from '../helpers/sqlite-temp';

/*
 * A resume snapshot taken between two steps of one long top-level agent names how many of the agent's steps
 * it folded (`flow.steps`), and a resume starts the agent there: it does not pass the folded steps one by one
 * (a 20,000-step agent's resume took 20 ms, against 1.3 ms for a 1,000-step one). The folded steps count as
 * reused; none runs again; the run ends with the state an uncrashed run has.
 */

const STEPS = RESUME_BASE_EVERY + 40;
const runs = new Map<number, number>();
const hooks: { stopAt?: number; stop?: AbortController } = {};

class CountState {
  @IsString() subject!: string;
  @IsOptional() @IsNumber() at?: number;
  @IsOptional() @IsNumber() sum?: number;
}

class Long extends Agent {}
for (let i = 0; i < STEPS; i++) {
  const name = `s${i}`;
  const method = function (ctx: StepContext<CountState>) {
    runs.set(i, (runs.get(i) ?? 0) + 1);
    if (hooks.stopAt !== undefined && i + 1 >= hooks.stopAt) hooks.stop?.abort('test: pause');
    return { at: i, sum: (ctx.state.sum ?? 0) + i };
  };
  Object.defineProperty(Long.prototype, name, { value: method, writable: true, configurable: true });
  Step()(Long.prototype, name, Object.getOwnPropertyDescriptor(Long.prototype, name)!);
}

@Pipeline({ name: 'snapshot-inside-agent', version: '1.0.0', state: CountState, agents: [Long] })
class OneLongAgent {}

const expectedSum = (STEPS * (STEPS - 1)) / 2;

async function pausedThenResumed(waypoint: Waypoint, runId: string): Promise<void> {
  runs.clear();
  hooks.stop = new AbortController();
  hooks.stopAt = RESUME_BASE_EVERY + 20; // past the first snapshot, which falls between two of Long's steps
  const first = await waypoint.run(OneLongAgent, { runId, input: { subject: 's' }, signal: hooks.stop.signal });
  assert.equal(first.status, 'paused');
  const ranBefore = first.stepsExecuted;
  const snapshot = await waypoint.store.getOperation(resumeBaseKey(runId));
  assert.ok(snapshot?.result, 'a resume snapshot was taken');
  const base = JSON.parse(snapshot.result) as { output: string };
  const flow = (JSON.parse(base.output) as { flow?: { done: number; steps?: number } }).flow;
  assert.equal(flow?.done, 0, 'inside the first top-level entry');
  assert.ok(flow?.steps !== undefined && flow.steps > 0 && flow.steps <= ranBefore, `the snapshot names the agent's folded steps (${JSON.stringify(flow)})`);

  hooks.stopAt = undefined;
  // How often the resume asks whether a step was folded: a walk from the agent's first step asks once per folded step.
  let asked = 0;
  const proto = PathSet.prototype;
  const has = Object.getOwnPropertyDescriptor(proto, 'has')!.value as (this: PathSet, path: string) => boolean;
  proto.has = function (this: PathSet, path: string) {
    asked += 1;
    return has.call(this, path);
  };
  let resumed;
  try {
    resumed = await waypoint.resume(runId);
  } finally {
    proto.has = has;
  }
  // About 100 here (the rows after the snapshot and the steps still to run), against 600 walking from the first step.
  assert.ok(asked < flow.steps / 2, `the resume asked ${asked} times whether a step was folded (${flow.steps} folded)`);
  assert.equal(resumed.status, 'completed');
  assert.equal(resumed.stepsSkipped, ranBefore, 'every step recorded before the pause is reused: the folded ones and the rows after the snapshot');
  assert.equal(resumed.stepsExecuted, STEPS - ranBefore);
  assert.deepEqual(
    [...runs].filter(([, n]) => n !== 1),
    [],
    'each step ran exactly once over the two calls',
  );
  assert.equal(runs.size, STEPS);
  assert.equal(resumed.state.sum, expectedSum);
  assert.equal(resumed.state.at, STEPS - 1);
}

describe('a resume snapshot between two steps of a long top-level agent', () => {
  it('memory store: the resume starts the agent after its folded steps, each step runs once', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    try {
      await pausedThenResumed(waypoint, 'inside-memory');
    } finally {
      await waypoint.close();
    }
  });

  it('SQLite: the same, and a second resume of the completed run runs nothing', async () => {
    const { file, remove } = tempSqlitePath();
    const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: file })] });
    try {
      await pausedThenResumed(waypoint, 'inside-sqlite');
      const again = await waypoint.resume('inside-sqlite');
      assert.equal(again.status, 'completed');
      assert.equal(again.stepsExecuted, 0);
    } finally {
      await waypoint.close();
      remove();
    }
  });
});
