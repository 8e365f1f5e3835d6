import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { beforeEach, describe, it } from 'node:test';
import { ContainerModule, injectable } from 'inversify';
import { DurableRequestChangedError, durable } from '../../src/integrations/durable-call';
import {
  Agent,
  MemoryCheckpointStore,
  NonRetryableError,
  Pipeline,
  Step,
  TOKENS,
  Waypoint,
  sqliteStorage,
  type CheckpointStore,
  type Logger,
  type StepContext,
} from '../../src/index';
import { code } from './langgraph-harness';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** A stand-in for an LLM SDK client: counts what it was paid for. */
const llm = {
  calls: [] as string[],
  failures: 0,
  chat(prompt: string, signal: AbortSignal): Promise<{ text: string; usage: { tokens: number } }> {
    assert.ok(signal instanceof AbortSignal, 'the step signal is passed to the call');
    if (this.failures > 0) {
      this.failures -= 1;
      return Promise.reject(new Error('503 from the provider'));
    }
    this.calls.push(prompt);
    return Promise.resolve({ text: `answer ${this.calls.length} to ${prompt}`, usage: { tokens: prompt.length } });
  },
};

const scenario = { outlinePrompt: 'outline AAPL', crash: false, policy: 'error' as 'error' | 'rerun', withRequest: true };

@injectable()
class Writer extends Agent {
  @Step({ retries: { maxAttempts: 3, initialDelayMs: 1, jitter: false } })
  async draft(ctx: StepContext) {
    const prompt = scenario.outlinePrompt;
    const outline = await durable(ctx, 'outline', (signal) => llm.chat(prompt, signal), {
      request: scenario.withRequest ? { model: 'm-1', prompt } : undefined,
      onRequestChange: scenario.policy,
      retries: { maxAttempts: 3, initialDelayMs: 1, jitter: false },
    });
    const first = await durable(ctx, 'section', (signal) => llm.chat('section', signal), { request: 'section' });
    const second = await durable(ctx, 'section', (signal) => llm.chat('section', signal), { request: 'section' });
    if (scenario.crash) throw new NonRetryableError('crash after the calls');
    return { outline: outline.text, sections: [first.text, second.text] };
  }
}

@Pipeline({ name: 'durable-calls', version: '1.0.0', agents: [Writer] })
class Report {}

const quiet = () => new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent));

async function start(store: CheckpointStore = new MemoryCheckpointStore()): Promise<Waypoint> {
  const storage = new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store));
  return Waypoint.create({ modules: [quiet(), storage], pipelines: [Report] });
}

beforeEach(() => {
  llm.calls = [];
  llm.failures = 0;
  Object.assign(scenario, { outlinePrompt: 'outline AAPL', crash: false, policy: 'error', withRequest: true });
});

describe('durable(ctx, name, call): raw SDK calls recorded once per run', () => {
  it('a resumed step gets the recorded responses; no call is paid for twice; equal names are told apart by order', async () => {
    const waypoint = await start();
    scenario.crash = true;
    await assert.rejects(waypoint.run(Report, { runId: 'r1', input: {} }), code('STEP_FAILED', 'crash after the calls'));
    assert.deepEqual(llm.calls, ['outline AAPL', 'section', 'section']);
    scenario.crash = false;
    const result = await waypoint.resume('r1');
    assert.equal(result.status, 'completed');
    assert.equal(llm.calls.length, 3, 'the resume paid for nothing');
    assert.deepEqual(result.state, { outline: 'answer 1 to outline AAPL', sections: ['answer 2 to section', 'answer 3 to section'] });
  });

  it('survives the process: a new Waypoint on the same SQLite file reuses the responses', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'waypoint-durable-'));
    try {
      const file = path.join(dir, 'w.db');
      scenario.crash = true;
      const first = await Waypoint.create({ modules: [quiet(), sqliteStorage({ path: file })], pipelines: [Report] });
      await assert.rejects(first.run(Report, { runId: 'r2', input: {} }), code('STEP_FAILED', 'crash after the calls'));
      await first.close();
      scenario.crash = false;
      const second = await Waypoint.create({ modules: [quiet(), sqliteStorage({ path: file })], pipelines: [Report] });
      assert.equal((await second.resume('r2')).status, 'completed');
      await second.close();
      assert.equal(llm.calls.length, 3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a changed request is refused by default with DURABLE_REQUEST_CHANGED naming run, step and call, and costs nothing', async () => {
    const waypoint = await start();
    scenario.crash = true;
    await assert.rejects(waypoint.run(Report, { runId: 'r3', input: {} }), code('STEP_FAILED', 'crash after the calls'));
    scenario.crash = false;
    scenario.outlinePrompt = 'outline AAPL, in French';
    const err = await waypoint.resume('r3').catch((e: unknown) => e);
    assert.ok(err instanceof DurableRequestChangedError, String(err));
    assert.equal(err.code, 'DURABLE_REQUEST_CHANGED');
    assert.deepEqual([err.runId, err.step, err.call], ['r3', 'Writer/draft', 'outline']);
    assert.match(err.message, /run 'r3'/);
    assert.match(err.message, /onRequestChange: 'rerun'/);
    assert.equal(llm.calls.length, 3, 'not called again');
    assert.equal((await waypoint.get('r3'))?.status, 'failed');
    // Reverting the change reuses the recorded response.
    scenario.outlinePrompt = 'outline AAPL';
    assert.equal((await waypoint.resume('r3')).status, 'completed');
    assert.equal(llm.calls.length, 3);
  });

  it("'rerun' pays once for the new request, reuses it on the next resume, and reverting reuses the first", async () => {
    const waypoint = await start();
    scenario.policy = 'rerun';
    scenario.crash = true;
    await assert.rejects(waypoint.run(Report, { runId: 'r4', input: {} }), code('STEP_FAILED', 'crash after the calls'));
    scenario.outlinePrompt = 'outline MSFT';
    await assert.rejects(waypoint.resume('r4'), code('STEP_FAILED', 'crash after the calls'));
    assert.deepEqual(llm.calls, ['outline AAPL', 'section', 'section', 'outline MSFT']);
    scenario.outlinePrompt = 'outline AAPL';
    await assert.rejects(waypoint.resume('r4'), code('STEP_FAILED', 'crash after the calls'));
    assert.equal(llm.calls.length, 4, 'the reverted request reused the first response');
    scenario.outlinePrompt = 'outline MSFT';
    scenario.crash = false;
    const result = await waypoint.resume('r4');
    assert.equal(llm.calls.length, 4, 'the new request was recorded too');
    assert.equal((result.state as { outline: string }).outline, 'answer 4 to outline MSFT');
  });

  it('without a request the call is identified by name and order; a failing call is retried and recorded once', async () => {
    const waypoint = await start();
    scenario.withRequest = false;
    llm.failures = 2;
    const result = await waypoint.run(Report, { runId: 'r5', input: {} });
    assert.equal(result.status, 'completed');
    assert.deepEqual(llm.calls, ['outline AAPL', 'section', 'section']);
    scenario.outlinePrompt = 'another prompt, unnoticed without a request';
    assert.equal((await waypoint.run(Report, { runId: 'r5', input: {} })).status, 'completed');
    assert.equal(llm.calls.length, 3);
  });

  it('refuses misuse: outside a step, with another step context, a bad policy, an unstorable request', async () => {
    const fakeCtx = { runId: 'x', agentId: 'A', stepName: 's', signal: new AbortController().signal } as StepContext;
    await assert.rejects(
      durable(fakeCtx, 'outline', () => 1),
      code('SIDE_EFFECT_OUTSIDE_RUN'),
    );
    await assert.rejects(
      durable(fakeCtx, 'outline', () => 1, { onRequestChange: 'maybe' as 'error' }),
      code('INVALID_OPTIONS'),
    );

    @injectable()
    class Misuser extends Agent {
      @Step() async misuse(ctx: StepContext) {
        await assert.rejects(
          durable({ ...ctx, stepName: 'other' }, 'x', () => 1),
          code('DURABLE_CONTEXT_MISMATCH', 'Misuser/misuse'),
        );
        await assert.rejects(
          durable(ctx, 'x', () => 1, { request: { fn: () => 1 } }),
          code('UNSERIALIZABLE_VALUE', 'x'),
        );
        return { checked: true };
      }
    }
    @Pipeline({ name: 'durable-misuse', version: '1.0.0', agents: [Misuser] })
    class Misuse {}
    const waypoint = await start();
    assert.deepEqual((await waypoint.run(Misuse, { runId: 'm', input: {} })).state, { checked: true });
  });
});
