import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { beforeEach, describe, it } from 'node:test';
import { ContainerModule, injectable } from 'inversify';
import { DurableRequestChangedError, durable, type DurableCallOptions } from '../../src/integrations/durable-call';
import { serialize } from '../../src/core/state/serializer';
import { deserialize } from '../../src/core/state/value-decoder';
import {
  Agent,
  MemoryCheckpointStore,
  NonRetryableError,
  Pipeline,
  Step,
  TOKENS,
  Waypoint,
  WaypointError,
  type Logger,
  type OperationRecord,
  type StepContext,
} from '../../src/index';
import { code } from './langgraph-harness';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** An upstream that fails its first `failures` calls with `makeError()`, then answers. */
const upstream = {
  calls: 0,
  failures: 0,
  makeError: (): unknown => Object.assign(new Error('upstream 503'), { code: 'E_UPSTREAM', status: 503 }),
  lastThrown: undefined as unknown,
  lookup(): Promise<{ found: string }> {
    this.calls += 1;
    if (this.calls <= this.failures) {
      this.lastThrown = this.makeError();
      return Promise.reject(this.lastThrown);
    }
    return Promise.resolve({ found: `record after ${this.calls} call(s)` });
  },
};

const scenario = {
  options: {} as DurableCallOptions,
  crash: false,
  /** What the step saw thrown by the first call (replayed or live), and whether it was the very object the upstream threw. */
  seen: [] as { thrown: unknown; original: boolean }[],
  followUps: [] as string[],
};

@injectable()
class Lookup extends Agent {
  @Step()
  async find(ctx: StepContext) {
    let found: string;
    try {
      found = (await durable(ctx, 'lookup', () => upstream.lookup(), scenario.options)).found;
    } catch (error) {
      scenario.seen.push({ thrown: error, original: error === upstream.lastThrown });
      found = `lookup failed: ${String(error)}`;
    }
    // The step goes on with what it got, as a tool loop does: the next call's request carries it.
    const next = await durable(ctx, 'summarize', () => (scenario.followUps.push(found), `summary of ${found}`), { request: { found } });
    if (scenario.crash) throw new NonRetryableError('crash after the calls');
    return { found, next };
  }
}

@Pipeline({ name: 'durable-errors', version: '1.0.0', agents: [Lookup] })
class Lookups {}

/** A store that reads its operation records as the previous release wrote them: without request outlines. */
class PreviousReleaseRecords extends MemoryCheckpointStore {
  override async getOperation(key: string): Promise<OperationRecord | null> {
    const record = await super.getOperation(key);
    if (!record?.result) return record;
    const { outline: _outline, ...rest } = deserialize<Record<string, unknown>>(record.result);
    return { ...record, result: serialize(rest) };
  }
}

async function start(store = new MemoryCheckpointStore(), pipelines: (new () => object)[] = [Lookups]): Promise<Waypoint> {
  const modules = [
    new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent)),
    new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store)),
  ];
  return Waypoint.create({ modules, pipelines });
}

/** Runs once with every call made, failing the step afterwards, then resumes with the crash switched off. */
async function runThenResume(runId: string) {
  const waypoint = await start();
  scenario.crash = true;
  await assert.rejects(waypoint.run(Lookups, { runId, input: {} }), code('STEP_FAILED', 'crash after the calls'));
  scenario.crash = false;
  const callsBefore = upstream.calls;
  const result = await waypoint.resume(runId);
  return { result, callsOnResume: upstream.calls - callsBefore };
}

beforeEach(() => {
  Object.assign(upstream, { calls: 0, failures: 1, lastThrown: undefined, makeError: () => Object.assign(new Error('upstream 503'), { code: 'E_UPSTREAM', status: 503 }) });
  Object.assign(scenario, { options: {}, crash: false, seen: [], followUps: [] });
});

describe("durable(): a thrown error is the call's outcome with onError: 'record'", () => {
  it('replayed as thrown: same name, message, text and fields, without calling again; the original error object is thrown live', async () => {
    scenario.options = { onError: 'record' };
    const { result, callsOnResume } = await runThenResume('e1');
    assert.equal(callsOnResume, 0, 'the upstream was not called again');
    assert.equal(result.status, 'completed');
    assert.equal((result.state as { found: string }).found, 'lookup failed: Error: upstream 503');
    assert.deepEqual(scenario.followUps, ['lookup failed: Error: upstream 503'], 'the follow-up call matched its record: not made again');
    const [live, replayed] = scenario.seen;
    assert.equal(live.original, true, 'the live run got the very error the call threw');
    assert.equal(replayed.original, false);
    assert.ok(replayed.thrown instanceof Error);
    const error = replayed.thrown as Error & { code?: string; status?: number };
    assert.deepEqual([error.name, error.message, error.code, error.status, String(error)], ['Error', 'upstream 503', 'E_UPSTREAM', 503, 'Error: upstream 503']);
  });

  it("default ('rerun'): not recorded; the resume calls again, and the request that carried the error is refused, naming what differs", async () => {
    const waypoint = await start();
    scenario.crash = true;
    await assert.rejects(waypoint.run(Lookups, { runId: 'e2', input: {} }), code('STEP_FAILED', 'crash after the calls'));
    scenario.crash = false;
    const err = await waypoint.resume('e2').catch((e: unknown) => e);
    assert.equal(upstream.calls, 2, 'called again on resume, and it answered');
    assert.ok(err instanceof DurableRequestChangedError, String(err));
    assert.equal(err.call, 'summarize');
    assert.equal(err.difference, 'request.found differs; now: "record after 2 call(s)"');
    assert.match(err.message, /request\.found differs; now: "record after 2 call\(s\)"/);
  });

  it('a custom error class, a custom toString and a thrown non-Error are replayed as the step saw them', async () => {
    class UpstreamError extends Error {
      override name = 'UpstreamError';
      override toString() {
        return `upstream said no (${this.message})`;
      }
    }
    for (const [made, text] of [
      [() => new UpstreamError('quota'), 'upstream said no (quota)'],
      [() => 'a thrown string', 'a thrown string'],
      [() => ({ reason: 'a thrown object' }), '[object Object]'],
    ] as const) {
      upstream.calls = 0;
      scenario.seen = [];
      upstream.makeError = made;
      scenario.options = { onError: 'record' };
      const { result, callsOnResume } = await runThenResume(`custom-${text}`);
      assert.equal(callsOnResume, 0);
      assert.equal((result.state as { found: string }).found, `lookup failed: ${text}`);
      const [live, replayed] = scenario.seen.map((s) => s.thrown);
      assert.equal(String(replayed), String(live));
      if (live instanceof Error) assert.equal((replayed as Error).name, live.name);
      else assert.deepEqual(replayed, live);
    }
  });

  it('with retries, failing attempts are retried in the process and only the last error is recorded', async () => {
    scenario.options = { onError: 'record', retries: { maxAttempts: 3, initialDelayMs: 1, jitter: false } };
    upstream.failures = 2;
    let run = await runThenResume('r-ok');
    assert.equal((run.result.state as { found: string }).found, 'record after 3 call(s)', 'a transient failure retried in the process is not an outcome');
    assert.equal(run.callsOnResume, 0);
    upstream.calls = 0;
    upstream.failures = 5;
    run = await runThenResume('r-fail');
    assert.equal(upstream.calls, 3, 'three attempts, then the last error recorded');
    assert.equal(run.callsOnResume, 0);
    assert.equal((run.result.state as { found: string }).found, 'lookup failed: Error: upstream 503');
  });

  it('stops are never recorded, whatever onError says: abort and timeout errors, Waypoint errors; a function decides the rest', async () => {
    const cases: [string, () => unknown, DurableCallOptions['onError'], boolean][] = [
      ['abort', () => Object.assign(new Error('This operation was aborted'), { name: 'AbortError' }), 'record', false],
      ['timeout', () => new DOMException('The operation timed out.', 'TimeoutError'), 'record', false],
      ['waypoint', () => new WaypointError('LEASE_LOST', 'lease lost'), 'record', false],
      ['function: rerun 503', () => Object.assign(new Error('upstream 503'), { status: 503 }), (e) => ((e as { status?: number }).status === 503 ? 'rerun' : 'record'), false],
      ['function: record 404', () => Object.assign(new Error('not found'), { status: 404 }), (e) => ((e as { status?: number }).status === 503 ? 'rerun' : 'record'), true],
    ];
    for (const [what, made, onError, recorded] of cases) {
      upstream.calls = 0;
      upstream.makeError = made;
      scenario.options = { onError };
      const waypoint = await start();
      scenario.crash = true;
      await assert.rejects(waypoint.run(Lookups, { runId: what, input: {} }), code('STEP_FAILED', 'crash after the calls'));
      scenario.crash = true;
      await assert.rejects(waypoint.resume(what));
      assert.equal(upstream.calls, recorded ? 1 : 2, `${what}: ${recorded ? 'replayed' : 'called again'} on resume`);
      scenario.crash = false;
    }
  });

  it('DURABLE_REQUEST_CHANGED names the first differing element; a record of the previous release (no outline) still resumes and is refused with the hashes only', async () => {
    @injectable()
    class Chat extends Agent {
      @Step() async chat(ctx: StepContext) {
        const messages = ['You are terse.', 'Hello', scenario.crash ? 'Summarize AAPL' : 'Summarize MSFT', 'Thanks'];
        const reply = await durable(ctx, 'chat', () => `reply ${upstream.calls++}`, { request: { model: 'm-1', messages } });
        if (scenario.crash) throw new NonRetryableError('crash after the calls');
        return { reply };
      }
    }
    @Pipeline({ name: 'durable-chat', version: '1.0.0', agents: [Chat] })
    class Chats {}
    for (const [store, expected] of [
      [new MemoryCheckpointStore(), 'request.messages[2] differs; now: "Summarize MSFT"'],
      [new PreviousReleaseRecords(), undefined],
    ] as const) {
      const waypoint = await start(store, [Chats]);
      scenario.crash = true;
      await assert.rejects(waypoint.run(Chats, { runId: 'chat', input: {} }), code('STEP_FAILED', 'crash after the calls'));
      scenario.crash = false;
      const err = await waypoint.resume('chat').catch((e: unknown) => e);
      assert.ok(err instanceof DurableRequestChangedError, String(err));
      assert.equal(err.difference, expected);
      if (expected) assert.match(err.message, /request\.messages\[2\] differs; now: "Summarize MSFT"\. If the code changed/);
      else assert.match(err.message, /its prompt or parameters changed since it ran/);
      assert.match(err.message, /a clock or a random id/);
    }
  });

  it("an error thrown once the step's signal is aborted (a step timeout, a shutdown) is a stop: not recorded, the call runs again", async () => {
    @injectable()
    class Slow extends Agent {
      @Step({ timeoutMs: 50 })
      async wait(ctx: StepContext) {
        const answer = await durable(
          ctx,
          'slow',
          (signal) => {
            upstream.calls += 1;
            if (upstream.calls > 1) return 'answered';
            // Gives up when the step is stopped, with an error of its own (not an AbortError).
            return new Promise<string>((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('gave up waiting')), { once: true }));
          },
          { onError: 'record' },
        );
        return { answer };
      }
    }
    @Pipeline({ name: 'durable-slow', version: '1.0.0', agents: [Slow] })
    class Slows {}
    const waypoint = await start(new MemoryCheckpointStore(), [Slows]);
    await assert.rejects(waypoint.run(Slows, { runId: 'slow', input: {} }), code('STEP_FAILED', 'exceeded its timeout'));
    assert.equal(upstream.calls, 1);
    const result = await waypoint.resume('slow');
    assert.equal(upstream.calls, 2, 'called again: the error was not recorded');
    assert.deepEqual(result.state, { answer: 'answered' });
  });
});
