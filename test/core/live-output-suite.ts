import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import {
  Agent,
  NonRetryableError,
  currentTransaction,
  parallel,
  SideEffect,
  Pipeline,
  Step,
  TOKENS,
  Waypoint,
  WaypointError,
  type Logger,
  type StepContext,
  type StoredStreamEvent,
  type WaypointOptions,
} from '../../src/index';
import { supportsStreams } from '../../src/contract/run-stream';
import { currentStep } from '../../src/core/step/run-context';
import { deserialize } from '../../src/core/state/value-decoder';

/*
 * The writing side of live output (issue 37) on one backend: ctx.emit and currentStep().emit append parts
 * in order before the step's row; a failed attempt (thrown, timed out) is retracted before the next
 * attempt's parts; a resumed run retracts what a dead execution left open; statuses for start, pause,
 * resume, waiting, completion, failure and cancel; limits and unserializable parts throw at the emit.
 */

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Every event of run `runId`'s stream. */
export async function streamOf(waypoint: Waypoint, runId: string): Promise<StoredStreamEvent[]> {
  const store = waypoint.store;
  assert.ok(supportsStreams(store));
  return store.readEvents(runId, 0, 10_000);
}

/** The parts a reader keeps once retractions are applied: [step, attempt, value]. */
export function visibleParts(events: readonly StoredStreamEvent[]): [string, number, unknown][] {
  let kept: { step: string; attempt: number; data: string }[] = [];
  for (const event of events) {
    if (event.kind === 'part') kept.push(event);
    else if (event.kind === 'retract') kept = kept.filter((part) => part.step !== event.step || part.attempt !== event.attempt);
  }
  return kept.map((part) => [part.step, part.attempt, deserialize(part.data)]);
}

/** Offsets are 0, 1, 2, ... */
export function assertContiguous(events: readonly StoredStreamEvent[]): void {
  assert.deepEqual(
    events.map((event) => event.offset),
    events.map((_, index) => index),
  );
}

const statuses = (events: readonly StoredStreamEvent[]) => events.flatMap((e) => (e.kind === 'status' ? [e.detail === undefined ? e.status : `${e.status}:${e.detail}`] : []));
const shape = (events: readonly StoredStreamEvent[]) =>
  events.map((e) => (e.kind === 'status' ? e.status : e.kind === 'retract' ? `retract ${e.step}#${e.attempt}` : `part ${e.step}#${e.attempt}`));

/** What a step saw of the stream when the next step started (the previous step's row was committed by then). */
const seenAtNextStep = new Map<string, number>();
let streamReader: Waypoint | undefined;

class Talker extends Agent {
  @Step() async speak(ctx: StepContext) {
    await sleep(1);
    // Emitted at once before the step returns: 64 leave at once, the rest waits for the writer's delay, which
    // no timer of the event loop can end before the row is appended: only the row's wait stores them first.
    for (let i = 0; i < 100; i++) ctx.emit({ i });
    helperThatEmits('done');
    return { said: 101 };
  }
  @Step() async check(ctx: StepContext) {
    const events = await streamOf(streamReader!, ctx.runId);
    seenAtNextStep.set(ctx.runId, events.filter((e) => e.kind === 'part').length);
    return {};
  }
}
/** Code a step calls, emitting through the run context rather than ctx. */
function helperThatEmits(part: unknown): void {
  currentStep()!.emit(part);
}
@Pipeline({ name: 'live-talk', version: '1', agents: [Talker] })
class TalkPipeline {}

class Flaky extends Agent {
  @Step({ retries: { maxAttempts: 3, initialDelayMs: 1, jitter: false } }) work(ctx: StepContext) {
    ctx.emit(`try ${ctx.attempt}`);
    if (ctx.attempt < 3) throw new Error(`boom ${ctx.attempt}`);
    return { tries: ctx.attempt };
  }
}
@Pipeline({ name: 'live-flaky', version: '1', agents: [Flaky] })
class FlakyPipeline {}

/** The context of an attempt that timed out, kept by its step (as a callback left running would). */
let lateContext: StepContext | undefined;
class Slowpoke extends Agent {
  @Step({ timeoutMs: 80, retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } }) async think(ctx: StepContext) {
    ctx.emit(`thinking ${ctx.attempt}`);
    if (ctx.attempt === 1) lateContext = ctx;
    if (ctx.attempt === 1) await new Promise((resolve) => setTimeout(resolve, 2_000).unref());
    return { thought: true };
  }
}
@Pipeline({ name: 'live-timeout', version: '1', agents: [Slowpoke] })
class TimeoutPipeline {}

class Doomed extends Agent {
  @Step() fail(ctx: StepContext) {
    ctx.emit('last words');
    throw new NonRetryableError('no way');
  }
}
@Pipeline({ name: 'live-fail', version: '1', agents: [Doomed] })
class FailPipeline {}

let pauseNow: AbortController | undefined;
class Pausing extends Agent {
  @Step() one(ctx: StepContext) {
    ctx.emit('one');
    pauseNow?.abort('test pause');
    return { one: true };
  }
  @Step() two(ctx: StepContext) {
    ctx.emit('two');
    return { two: true };
  }
}
@Pipeline({ name: 'live-pause', version: '1', agents: [Pausing] })
class PausePipeline {}

class Approver extends Agent {
  @Step() async ask(ctx: StepContext) {
    ctx.emit('asking');
    const answer = await ctx.waitFor<string>('approval');
    ctx.emit(`answer ${answer}`);
    return { answer };
  }
}
@Pipeline({ name: 'live-wait', version: '1', agents: [Approver] })
class WaitPipeline {}

class Left extends Agent {
  @Step() async left(ctx: StepContext) {
    for (let i = 0; i < 5; i++) {
      ctx.emit(`L${i}`);
      await sleep(1);
    }
    return { left: true };
  }
}
class Right extends Agent {
  @Step() async right(ctx: StepContext) {
    for (let i = 0; i < 5; i++) {
      ctx.emit(`R${i}`);
      await sleep(1);
    }
    return { right: true };
  }
}
@Pipeline({ name: 'live-parallel', version: '1', agents: [parallel(Left, Right)] })
class ParallelPipeline {}

let badPart: unknown;
class Emitter extends Agent {
  @Step() emitOne(ctx: StepContext) {
    ctx.emit(badPart);
    return {};
  }
}
@Pipeline({ name: 'live-emit-one', version: '1', agents: [Emitter] })
class EmitOnePipeline {}

class Booker extends Agent {
  /** A side effect in the step's database transaction (SQLite: the store's one writer until the row commits). */
  @SideEffect({ name: 'book', transactional: true })
  async book(): Promise<number> {
    await currentTransaction().query('SELECT 1');
    return 1;
  }
  @Step() async go(ctx: StepContext) {
    ctx.emit('before the transaction');
    await this.book();
    for (let i = 0; i < 100; i++) ctx.emit(`inside ${i}`);
    return { booked: true };
  }
}
@Pipeline({ name: 'live-transaction', version: '1', agents: [Booker] })
class TransactionPipeline {}

/** How the chatty step saw its stop: the code of its signal's reason, or 'never' when nothing stopped it. */
let chatterStop: string | undefined;
class Chatterbox extends Agent {
  @Step() async talk(ctx: StepContext) {
    const until = Date.now() + 15_000; // bounds a hang only: the stop comes within a batch or two
    while (Date.now() < until) {
      ctx.emit('blah');
      if (ctx.signal.aborted) {
        chatterStop = (ctx.signal.reason as { code?: string }).code ?? 'other';
        throw ctx.signal.reason;
      }
      await sleep(5);
    }
    chatterStop = 'never';
    return {};
  }
}
@Pipeline({ name: 'live-chatter', version: '1', agents: [Chatterbox] })
class ChatterPipeline {}

/** Runs the live-output cases on the backend `storage()` opens (`transactions`: it has step transactions, SQL). */
export function liveOutputSuite(name: string, storage: () => ContainerModule, cleanup?: () => Promise<void>, transactions = false, base: Partial<WaypointOptions> = {}): void {
  describe(`live output, the writing side, on ${name}`, () => {
    let waypoint: Waypoint;
    const open = (options: Partial<WaypointOptions> = {}) =>
      Waypoint.create({ modules: [storage(), new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent))], ...base, ...options });
    before(async () => {
      waypoint = await open();
      streamReader = waypoint;
    });
    after(async () => {
      await waypoint.close();
      await cleanup?.();
    });
    const id = (tag: string) => `${tag}-${randomUUID().slice(0, 8)}`;

    it('appends a step’s parts in order (ctx.emit and currentStep().emit), stored before its row, then completed last', async () => {
      const runId = id('talk');
      const result = await waypoint.run(TalkPipeline, { runId, input: {} });
      assert.equal(result.status, 'completed');
      const events = await streamOf(waypoint, runId);
      assertContiguous(events);
      assert.deepEqual(statuses(events), ['running', 'completed']);
      assert.equal(events.at(-1)!.kind, 'status');
      assert.deepEqual(visibleParts(events), [...Array.from({ length: 100 }, (_, i) => ['Talker/speak', 1, { i }]), ['Talker/speak', 1, 'done']]);
      assert.equal(seenAtNextStep.get(runId), 101, 'every part of the step was stored when its row was');
    });

    it('retracts each failed attempt before the next attempt’s parts; only the recorded attempt’s parts stay', async () => {
      const runId = id('flaky');
      assert.equal((await waypoint.run(FlakyPipeline, { runId, input: {} })).status, 'completed');
      const events = await streamOf(waypoint, runId);
      assertContiguous(events);
      assert.deepEqual(shape(events), ['running', 'part Flaky/work#1', 'retract Flaky/work#1', 'part Flaky/work#2', 'retract Flaky/work#2', 'part Flaky/work#3', 'completed']);
      assert.deepEqual(visibleParts(events), [['Flaky/work', 3, 'try 3']]);
    });

    it('retracts an attempt that timed out', async () => {
      const runId = id('timeout');
      assert.equal((await waypoint.run(TimeoutPipeline, { runId, input: {} })).status, 'completed');
      const events = await streamOf(waypoint, runId);
      assert.deepEqual(shape(events), ['running', 'part Slowpoke/think#1', 'retract Slowpoke/think#1', 'part Slowpoke/think#2', 'completed']);
      assert.deepEqual(visibleParts(events), [['Slowpoke/think', 2, 'thinking 2']]);
      // Emitting through the dead attempt's context later neither throws nor appends anything.
      lateContext!.emit('too late');
      lateContext!.emit(() => 'not even serializable');
      await sleep(60); // past the writer's 25 ms batching delay
      assert.equal((await streamOf(waypoint, runId)).length, events.length);
    });

    it('a failed run: its attempt retracted, then failed as the last event', async () => {
      const runId = id('fail');
      await assert.rejects(waypoint.run(FailPipeline, { runId, input: {} }), (error: unknown) => error instanceof WaypointError);
      const events = await streamOf(waypoint, runId);
      assert.deepEqual(shape(events), ['running', 'part Doomed/fail#1', 'retract Doomed/fail#1', 'failed']);
    });

    it('statuses of a run paused, resumed and completed; a waiting run says what it waits for', async () => {
      const runId = id('pause');
      pauseNow = new AbortController();
      const first = await waypoint.run(PausePipeline, { runId, input: {}, signal: pauseNow.signal });
      pauseNow = undefined;
      assert.equal(first.status, 'paused');
      assert.equal((await waypoint.resume(runId)).status, 'completed');
      const events = await streamOf(waypoint, runId);
      assertContiguous(events);
      assert.deepEqual(shape(events), ['running', 'part Pausing/one#1', 'paused', 'running', 'part Pausing/two#1', 'completed']);
      assert.deepEqual(statuses(events), ['running', 'paused:test pause', 'running', 'completed']);

      const waiting = id('wait');
      assert.equal((await waypoint.run(WaitPipeline, { runId: waiting, input: {} })).status, 'waiting');
      await waypoint.signal(waiting, 'approval', 'yes');
      assert.equal((await waypoint.resume(waiting)).status, 'completed');
      const waited = await streamOf(waypoint, waiting);
      assert.deepEqual(shape(waited), [
        'running',
        'part Approver/ask#1',
        'retract Approver/ask#1',
        'waiting',
        'running',
        'part Approver/ask#1',
        'part Approver/ask#1',
        'completed',
      ]);
      assert.deepEqual(statuses(waited), ['running', 'waiting:approval', 'running', 'completed']);
      assert.deepEqual(visibleParts(waited), [
        ['Approver/ask', 1, 'asking'],
        ['Approver/ask', 1, 'answer yes'],
      ]);
    });

    it('a cancel from outside the execution appends cancelled, once', async () => {
      const runId = id('cancel');
      pauseNow = new AbortController();
      await waypoint.run(PausePipeline, { runId, input: {}, signal: pauseNow.signal });
      pauseNow = undefined;
      await waypoint.cancel(runId);
      await waypoint.cancel(runId).catch(() => undefined);
      assert.deepEqual(statuses(await streamOf(waypoint, runId)), ['running', 'paused:test pause', 'cancelled']);
    });

    it('a stream append refused for a lost lease stops the execution (no heartbeat needed); a cancel’s status is the last event', async () => {
      // A lease renewed every 200 s: only the stream's fenced appends can notice the takeover in time.
      const slow = await open({ leaseTtlMs: 600_000 });
      try {
        const runId = id('fenced');
        chatterStop = undefined;
        const running = slow.run(ChatterPipeline, { runId, input: {} });
        running.catch(() => undefined);
        while ((await streamOf(waypoint, runId)).filter((e) => e.kind === 'part').length < 3) await sleep(5);
        await waypoint.cancel(runId);
        await assert.rejects(running, (error: unknown) => (error as WaypointError).code === 'RUN_CANCELLED');
        while (chatterStop === undefined) await sleep(5); // the attempt failed at once; the step notices its signal at its next turn
        assert.equal(chatterStop, 'LEASE_LOST');
        const events = await streamOf(waypoint, runId);
        assert.deepEqual(events.at(-1), { ...events.at(-1), kind: 'status', status: 'cancelled' });
        assertContiguous(events);
      } finally {
        await slow.close();
      }
    });

    it('parallel branches emit under their own paths, each in order', async () => {
      const runId = id('parallel');
      assert.equal((await waypoint.run(ParallelPipeline, { runId, input: {} })).status, 'completed');
      const parts = visibleParts(await streamOf(waypoint, runId));
      assert.deepEqual(
        parts.filter(([step]) => step === 'parallel[0]/Left/left').map(([, , value]) => value),
        ['L0', 'L1', 'L2', 'L3', 'L4'],
      );
      assert.deepEqual(
        parts.filter(([step]) => step === 'parallel[1]/Right/right').map(([, , value]) => value),
        ['R0', 'R1', 'R2', 'R3', 'R4'],
      );
      assert.equal(parts.length, 10);
    });

    it('a resumed run retracts the attempts a dead execution left open, before its own parts', async () => {
      const runId = id('orphans');
      pauseNow = new AbortController();
      await waypoint.run(PausePipeline, { runId, input: {}, signal: pauseNow.signal });
      pauseNow = undefined;
      // What an execution killed in step two leaves behind: its start, a part, no retraction, no row.
      const store = waypoint.store;
      assert.ok(supportsStreams(store));
      await store.appendEvents(runId, [
        { kind: 'status', status: 'running' },
        { kind: 'part', step: 'Pausing/two', attempt: 1, data: '"half"' },
      ]);
      assert.equal((await waypoint.resume(runId)).status, 'completed');
      const events = await streamOf(waypoint, runId);
      assert.deepEqual(shape(events).slice(3), ['running', 'part Pausing/two#1', 'retract Pausing/two#1', 'running', 'part Pausing/two#1', 'completed']);
      assert.deepEqual(visibleParts(events), [
        ['Pausing/one', 1, 'one'],
        ['Pausing/two', 1, 'two'],
      ]);
    });

    it('an unserializable part or one over maxPartBytes throws its typed error at the emit; the step fails without retries', async () => {
      badPart = () => 'a function';
      await assert.rejects(waypoint.run(EmitOnePipeline, { runId: id('unserializable'), input: {} }), (error: unknown) => {
        assert.ok(error instanceof WaypointError && error.code === 'UNSERIALIZABLE_VALUE', String(error));
        return true;
      });
      const small = await open({ liveOutput: { maxPartBytes: 64 } });
      try {
        badPart = 'é'.repeat(40); // 80 bytes of UTF-8 (+ quotes), 42 UTF-16 units
        const runId = id('too-large');
        await assert.rejects(small.run(EmitOnePipeline, { runId, input: {} }), (error: unknown) => {
          // Not retried: the run fails with the limit's own error.
          const cause = error as WaypointError & { limit: string; actual: number };
          assert.equal(cause.code, 'STREAM_LIMIT', String(error));
          assert.equal(cause.limit, 'part-bytes');
          assert.equal(cause.actual, 82);
          assert.match(cause.message, new RegExp(`Step 'Emitter/emitOne' of run '${runId}'`));
          return true;
        });
        badPart = 'é'.repeat(30);
        assert.equal((await small.run(EmitOnePipeline, { runId: id('fits'), input: {} })).status, 'completed');
      } finally {
        await small.close();
      }
    });

    if (transactions)
      it('a step that emits inside its transaction (a transactional side effect) is recorded with its parts', async () => {
        const runId = id('transaction');
        assert.equal((await waypoint.run(TransactionPipeline, { runId, input: {} })).status, 'completed');
        const events = await streamOf(waypoint, runId);
        assert.equal(visibleParts(events).length, 101);
        assert.deepEqual(statuses(events), ['running', 'completed']);
      });

    it('a run whose stream holds maxEventsPerRun events refuses more parts', async () => {
      const capped = await open({ liveOutput: { maxEventsPerRun: 50 } });
      try {
        const runId = id('capped');
        await assert.rejects(capped.run(TalkPipeline, { runId, input: {} }), (error: unknown) => {
          const cause = error as WaypointError & { limit?: string };
          assert.equal(cause.code, 'STREAM_LIMIT', String(error));
          assert.equal(cause.limit, 'events');
          return true;
        });
        const events = await streamOf(capped, runId);
        assert.equal(events.filter((e) => e.kind === 'part').length, 49, 'running plus 49 parts fill the 50');
        assert.deepEqual(shape(events).slice(-2), ['retract Talker/speak#1', 'failed']);
      } finally {
        await capped.close();
      }
    });
  });
}
