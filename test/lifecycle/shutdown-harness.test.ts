import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import {
  Agent,
  MemoryCheckpointStore,
  Pipeline,
  ShutdownHarness,
  Step,
  SystemClock,
  Waypoint,
  WaypointError,
  exitCodeFor,
  type LogFields,
  type StepContext,
} from '../../src/index';
import { PauseRequest } from '../../src/core/step/run-executor';
import { fakeTimeModule, keepAlive, silentLogger, until } from './fake-clock';

/**
 * The shutdown harness in this process: which listeners it installs and removes, how signals and a
 * deadline become a pause request, and runUntilSignal's clean-up and exit code. Signals are delivered
 * with process.emit (no real signal), and on SIGUSR2 where a handler must fire, so the test runner's own
 * SIGTERM / SIGINT behaviour is never touched.
 */

// Node 24's test runner starts each test file with every option set, --report-on-signal among them, so an
// emitted SIGUSR2 (its report signal) would also write a diagnostic report into the working directory.
process.report.reportOnSignal = false;

const counts = (...names: NodeJS.Signals[]) => names.map((n) => process.listenerCount(n));

class RecordingLogger {
  readonly warnings: { message: string; fields?: LogFields }[] = [];
  debug() {}
  info() {}
  warn(message: string, fields?: LogFields) {
    this.warnings.push({ message, fields });
  }
  error() {}
}

describe('ShutdownHarness', () => {
  it('installs nothing until install(); dispose() removes exactly its own listeners and leaves the host’s', () => {
    const host = () => {};
    process.on('SIGUSR2', host);
    try {
      const before = counts('SIGTERM', 'SIGINT', 'SIGUSR2');
      const harness = new ShutdownHarness(silentLogger);
      assert.deepEqual(counts('SIGTERM', 'SIGINT', 'SIGUSR2'), before, 'constructing installs nothing');
      harness.install();
      assert.deepEqual(counts('SIGTERM', 'SIGINT', 'SIGUSR2'), [before[0] + 1, before[1] + 1, before[2]], 'one listener per default signal');
      harness.dispose();
      assert.deepEqual(counts('SIGTERM', 'SIGINT', 'SIGUSR2'), before);
      assert.ok(process.listeners('SIGUSR2').includes(host), "the host's handler is still there");
      harness.dispose(); // idempotent
      assert.deepEqual(counts('SIGTERM', 'SIGINT', 'SIGUSR2'), before);
    } finally {
      process.removeListener('SIGUSR2', host);
    }
  });

  it('the first signal aborts with a PauseRequest naming it and logs once; the host’s handler runs too', () => {
    const logger = new RecordingLogger();
    let hostCalls = 0;
    const host = () => void (hostCalls += 1);
    process.on('SIGUSR2', host);
    const harness = new ShutdownHarness(logger, { signals: ['SIGUSR2'] }).install();
    try {
      process.emit('SIGUSR2', 'SIGUSR2');
      process.emit('SIGUSR2', 'SIGUSR2');
      assert.equal(harness.signal.aborted, true);
      assert.ok(harness.signal.reason instanceof PauseRequest);
      assert.equal(harness.signal.reason.why, 'SIGUSR2');
      assert.equal(harness.received, 'SIGUSR2');
      assert.equal(hostCalls, 2, 'the harness never swallows the host’s signal');
      assert.equal(logger.warnings.length, 1, 'a second signal is not logged again');
      assert.match(logger.warnings[0].message, /SIGUSR2 received: pausing at the next step boundary/);
    } finally {
      harness.dispose();
      process.removeListener('SIGUSR2', host);
    }
  });

  it('a deadline aborts at deadline - buffer; dispose() before that cancels it', async () => {
    const start = Date.now();
    const harness = new ShutdownHarness(silentLogger, { signals: [], deadline: new Date(start + 150), deadlineBufferMs: 100 }).install();
    const early = new ShutdownHarness(silentLogger, { signals: [], deadline: start + 60, deadlineBufferMs: 0 }).install();
    early.dispose();
    await keepAlive(until(() => harness.signal.aborted, 'the deadline'));
    const took = Date.now() - start;
    assert.ok(took >= 48 && took < 1_000, `fired ${took} ms after install, expected ~50`);
    assert.equal(harness.received, 'deadline');
    assert.equal((harness.signal.reason as PauseRequest).why, 'deadline');
    await new Promise((resolve) => setTimeout(resolve, 40));
    assert.equal(early.signal.aborted, false, 'a disposed harness never fires');
    harness.dispose();
  });

  it('exitCodeFor: 0 completed, 75 paused or waiting, 1 otherwise', () => {
    assert.deepEqual(['completed', 'paused', 'waiting', 'failed', 'cancelled', 'running'].map(exitCodeFor), [0, 75, 75, 1, 1, 1]);
  });
});

const behaviour = { fail: false, started: 0 };
class Worker extends Agent {
  @Step() async work(ctx: StepContext) {
    behaviour.started += 1;
    if (behaviour.fail) throw new Error('broken');
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, 10);
      // the abort reason, unchanged: the runtime tells a pause (a PauseRequest, not an Error) from a timeout by it
      ctx.signal.addEventListener('abort', () => (clearTimeout(timer), reject(ctx.signal.reason)), { once: true });
    });
    return { worked: true };
  }
  @Step() more() {
    return { more: true };
  }
}
@Pipeline({ name: 'until-signal', version: '1', agents: [Worker] })
class UntilSignal {}

describe('waypoint.runUntilSignal in this process', () => {
  async function withExitCode(fn: () => Promise<void>): Promise<void> {
    const saved = process.exitCode;
    try {
      await fn();
    } finally {
      process.exitCode = saved;
    }
  }

  it('removes its handlers after completing, after pausing and after throwing; sets the exit code only on a result', () =>
    withExitCode(async () => {
      const waypoint = await Waypoint.create({ modules: [fakeTimeModule(new SystemClock(), new MemoryCheckpointStore())] });
      const before = counts('SIGTERM', 'SIGINT', 'SIGUSR2');

      Object.assign(behaviour, { fail: false, started: 0 });
      const done = await waypoint.runUntilSignal(UntilSignal, { runId: 'done', input: {} });
      assert.equal(done.status, 'completed');
      assert.equal(process.exitCode, 0);
      assert.deepEqual(counts('SIGTERM', 'SIGINT', 'SIGUSR2'), before);

      const paused = waypoint.runUntilSignal(UntilSignal, { runId: 'paused', input: {} }, { signals: ['SIGUSR2'] });
      await until(() => behaviour.started === 2, 'the step to start');
      assert.equal(process.listenerCount('SIGUSR2'), before[2] + 1, 'installed while running');
      process.emit('SIGUSR2', 'SIGUSR2');
      assert.equal((await paused).status, 'paused');
      assert.equal(process.exitCode, 75);
      assert.deepEqual(counts('SIGTERM', 'SIGINT', 'SIGUSR2'), before);

      process.exitCode = undefined;
      behaviour.fail = true;
      await assert.rejects(waypoint.runUntilSignal(UntilSignal, { runId: 'broken', input: {} }), (err: WaypointError) => err.code === 'STEP_FAILED');
      assert.equal(process.exitCode, undefined, 'a failure rejects; the caller decides the exit code');
      assert.deepEqual(counts('SIGTERM', 'SIGINT', 'SIGUSR2'), before);
    }));

  it("combines the caller's own abort signal with the harness", () =>
    withExitCode(async () => {
      const waypoint = await Waypoint.create({ modules: [fakeTimeModule(new SystemClock(), new MemoryCheckpointStore())] });
      Object.assign(behaviour, { fail: false, started: 0 });
      const own = new AbortController();
      const running = waypoint.runUntilSignal(UntilSignal, { runId: 'own', input: {}, signal: own.signal });
      await until(() => behaviour.started === 1, 'the step to start');
      own.abort('shutting down the queue consumer');
      const result = await keepAlive(running);
      assert.deepEqual([result.status, result.lastSequence], ['paused', 0]);
      assert.match((await waypoint.get('own'))!.resumeHint ?? '', /shutting down the queue consumer/);
    }));
});
