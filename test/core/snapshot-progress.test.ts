import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { IsInt, IsOptional, IsString } from 'class-validator';
import { Agent, loop, memoryStorage, Pipeline, readPlan, Step, SystemClock, Waypoint, type StepContext } from '../../src/index';
import { loadRunProgress } from '../../src/core/history/progress-reads';
import { takeResumeBase } from '../../src/core/history/resume-base';

/*
 * A run's result after a resume counts its progress from the resume snapshot and the rows after it (issue 40):
 * the figures must be the ones every row gives, whether the snapshot's boundary is the last row (the next
 * iteration known from a folded check) or rows of an unfinished iteration follow it.
 */

class CountState {
  @IsString() subject!: string;
  @IsOptional() @IsInt() at?: number;
}

const hooks: { onCheck?: (at: number) => void; onTick?: (at: number) => void } = {};

class Counter extends Agent {
  @Step() tick(ctx: StepContext<CountState>) {
    const at = (ctx.state.at ?? 0) + 1;
    hooks.onTick?.(at);
    return { at };
  }

  @Step() tock() {
    return {};
  }
}

const until = (s: CountState) => {
  hooks.onCheck?.(s.at ?? 0);
  return (s.at ?? 0) >= 50;
};

@Pipeline({ name: 'snapshot-progress', version: '1.0.0', state: CountState, agents: [loop<CountState>({ until, maxIterations: 100 }, Counter)] })
class Counting {}

describe('progress from a resume snapshot and its tail', () => {
  let waypoint: Waypoint;
  before(async () => {
    waypoint = await Waypoint.create({ modules: [memoryStorage()] });
  });
  after(() => waypoint.close());

  async function pausedWithSnapshot(runId: string, pause: (stop: AbortController) => void) {
    const stop = new AbortController();
    pause(stop);
    const first = await waypoint.run(Counting, { runId, input: { subject: 's' }, signal: stop.signal });
    hooks.onCheck = hooks.onTick = undefined;
    assert.equal(first.status, 'paused');
    const run = (await waypoint.store.getRun(runId))!;
    const plan = readPlan(Counting);
    const at = await takeResumeBase({ store: waypoint.store, clock: new SystemClock(), integrity: {} }, plan, runId, { epoch: run.leaseEpoch });
    assert.ok(at !== null, 'a snapshot was taken');
    return { run, plan, at, first };
  }

  it('after a check that said continue (the snapshot is the last row): the next iteration is known', async () => {
    const { run, plan, at, first } = await pausedWithSnapshot('after-check', (stop) => {
      hooks.onCheck = (n) => n >= 7 && stop.abort('test: pause');
    });
    assert.equal(at, run.lastSequence, 'the snapshot is at the last row');
    const progress = await loadRunProgress(waypoint.store, run, plan, {});
    assert.deepEqual(progress, await loadRunProgress(waypoint.store, run, plan));
    assert.deepEqual(progress, { recorded: 14, planned: 16 });
    assert.deepEqual(first.progress, progress);
  });

  it('a sealed, encrypted Waypoint counts its views from the snapshot too: its key checks it, its store decrypts it', async () => {
    const hmacKey = 'progress-key';
    const sealed = await Waypoint.create({ modules: [memoryStorage()], hmacKey, encryption: { keys: { k1: Buffer.alloc(32, 7) }, activeKeyId: 'k1' } });
    try {
      const stop = new AbortController();
      hooks.onTick = (n) => n >= 20 && stop.abort('test: pause');
      assert.equal((await sealed.run(Counting, { runId: 'sealed', input: { subject: 's' }, signal: stop.signal }).finally(() => (hooks.onTick = undefined))).status, 'paused');
      const run = (await sealed.store.getRun('sealed'))!;
      const plan = readPlan(Counting);
      const parts = { store: sealed.store, clock: new SystemClock(), integrity: { hmacKey: Buffer.from(hmacKey, 'utf8') } };
      assert.ok((await takeResumeBase(parts, plan, 'sealed', { epoch: run.leaseEpoch })) !== null, 'a snapshot was taken');
      let rows = 0;
      const loadRun = sealed.store.loadRun.bind(sealed.store);
      const listSteps = sealed.store.listSteps.bind(sealed.store);
      sealed.store.loadRun = async (id) => {
        const loaded = await loadRun(id);
        rows += loaded?.steps.length ?? 0;
        return loaded;
      };
      sealed.store.listSteps = async (id, range) => {
        const found = await listSteps(id, range);
        rows += found.length;
        return found;
      };
      const info = (await sealed.get('sealed'))!;
      assert.ok(rows < 10, `get read ${rows} rows of ${run.lastSequence}`);
      assert.deepEqual(info.progress, await loadRunProgress(sealed.store, run, plan));
      // Without the key the snapshot's seal does not check: every row is read, for the same figure.
      rows = 0;
      assert.deepEqual(await loadRunProgress(sealed.store, run, plan, {}), info.progress);
      assert.ok(rows >= run.lastSequence, `without the key every row is read (${rows} of ${run.lastSequence})`);
    } finally {
      await sealed.close();
    }
  });

  it('inside an iteration (rows after the snapshot): the same figures as every row', async () => {
    const { run, plan, at } = await pausedWithSnapshot('mid-iteration', (stop) => {
      hooks.onTick = (n) => n >= 9 && stop.abort('test: pause');
    });
    assert.ok(at < run.lastSequence, 'rows follow the snapshot');
    const progress = await loadRunProgress(waypoint.store, run, plan, {});
    assert.deepEqual(progress, await loadRunProgress(waypoint.store, run, plan));
    assert.equal(progress.recorded, 17);
  });
});
