import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { Agent, MemoryCheckpointStore, Pipeline, Step, SystemClock, Waypoint } from '../../src/index';
import { killLiveChildren } from '../helpers/child-process';
import { PAUSED_EXIT, sqliteBackend, withBench } from './bench';
import { fakeTimeModule, keepAlive } from './fake-clock';
import { STEP_KEYS, stepsOf } from './pipeline';

const [, CRUNCH, PUBLISH] = STEP_KEYS as [string, string, string];

describe('hard deadline in a worker process (SQLite)', { timeout: 180_000 }, () => {
  after(killLiveChildren);

  for (const via of ['harness', 'run'] as const) {
    const where = via === 'harness' ? "runUntilSignal's shutdown options" : 'the run options';
    it(`a deadline in ${where} pauses the run before it (at deadline - buffer, exit 75); a later process resumes`, () =>
      withBench(
        sqliteBackend,
        `deadline-${via}`,
        async (b) => {
          const runId = `deadline-${via}`;
          const bufferMs = 500;
          const child = b.run(runId, { steps: { mode: 'honour', ms: 30_000 }, deadlineInMs: 1_000, deadlineBufferMs: bufferMs, deadlineVia: via });
          const { exit, out } = await b.outcome(child);
          assert.equal(exit.code, PAUSED_EXIT, exit.stderr);
          assert.equal(out.result?.status, 'paused');
          assert.equal(out.result?.lastSequence, 1);
          const deadline = out.deadline!;
          const info = (await b.reader.get(runId))!;
          const pausedAt = info.updatedAt.getTime();
          assert.ok(pausedAt >= deadline - bufferMs - 5, `paused ${deadline - pausedAt} ms before the deadline, not before deadline - buffer`);
          assert.ok(pausedAt <= deadline, `paused ${pausedAt - deadline} ms after the hard deadline`);
          assert.deepEqual(stepsOf(b.events(), child.pid, 'aborted'), [CRUNCH]);
          if (via === 'harness') assert.match(exit.stderr, new RegExp(`run '${runId}' paused after deadline at sequence 1`));
          else assert.match(info.resumeHint ?? '', /^Paused \(deadline\) after sequence 1/);

          const resumed = await b.complete(runId);
          assert.deepEqual(stepsOf(b.events(), resumed.pid), [CRUNCH, PUBLISH]);
          assert.deepEqual(await b.recorded(runId), STEP_KEYS);
        },
        killLiveChildren,
      ));
  }
});

/** What the in-process pipeline's middle step does. */
const script = { started: [] as string[], mode: 'quick' as 'ignore' | 'quick', ignoreMs: 0 };

class Timed extends Agent {
  @Step() first() {
    script.started.push('first');
    return { first: true };
  }
  @Step() async long() {
    script.started.push('long');
    if (script.mode === 'quick') return { long: true };
    // Ignores ctx.signal. Unref'd, so an abandoned step does not hold the test process open (the test
    // keeps the loop alive itself while it waits for the run).
    await new Promise((resolve) => setTimeout(resolve, script.ignoreMs).unref());
    return { long: true };
  }
  @Step() last() {
    script.started.push('last');
    return { last: true };
  }
}
@Pipeline({ name: 'deadline', version: '1', agents: [Timed] })
class DeadlinePipeline {}

async function setup() {
  const store = new MemoryCheckpointStore();
  return { store, waypoint: await Waypoint.create({ modules: [fakeTimeModule(new SystemClock(), store)] }) };
}

describe('hard deadline in process (RunOptions.deadline)', () => {
  it('the pause is recorded before the hard deadline even when the running step ignores its signal', async () => {
    // The deadline fires at deadline - buffer, then the step gets the full gracePeriodMs: with a grace
    // longer than the buffer, a step that ignores its signal carries the pause past the hard deadline.
    Object.assign(script, { started: [], mode: 'ignore', ignoreMs: 1_200 });
    const { waypoint } = await setup();
    const deadline = Date.now() + 400;
    const result = await keepAlive(waypoint.run(DeadlinePipeline, { runId: 'grace', input: {}, deadline, deadlineBufferMs: 250, gracePeriodMs: 2_000 }));
    assert.equal(result.status, 'paused');
    const pausedAt = (await waypoint.get('grace'))!.updatedAt.getTime();
    assert.ok(pausedAt <= deadline, `paused ${pausedAt - deadline} ms after the hard deadline`);
  });

  it('a deadline whose buffer has already begun starts no step at all', async () => {
    Object.assign(script, { started: [], mode: 'quick' });
    const { waypoint, store } = await setup();
    const result = await keepAlive(waypoint.run(DeadlinePipeline, { runId: 'late', input: {}, deadline: Date.now() + 100, deadlineBufferMs: 200 }));
    assert.deepEqual([result.status, result.stepsExecuted], ['paused', 0]);
    assert.deepEqual(script.started, [], 'no step was started after the pause point had passed');
    assert.deepEqual(await store.listSteps('late'), []);
  });

  it('a deadline far enough away changes nothing', async () => {
    Object.assign(script, { started: [], mode: 'quick' });
    const { waypoint } = await setup();
    const result = await waypoint.run(DeadlinePipeline, { runId: 'roomy', input: {}, deadline: Date.now() + 60_000, deadlineBufferMs: 1_000 });
    assert.deepEqual([result.status, result.stepsExecuted], ['completed', 3]);
    assert.deepEqual(script.started, ['first', 'long', 'last']);
  });
});
