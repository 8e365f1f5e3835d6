import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { DurableRequestChangedError } from '../../src/integrations/ai';
import { PrometheusTelemetry } from '../../src/integrations/prometheus';
import { buildTimeline } from '../../src/cli/timeline';
import { renderShow } from '../../src/cli/commands/runs-show';
import { runDetail } from '../../src/ui/run-views';
import { NoopTelemetry, type ModelCallEvent, type Telemetry, type Waypoint } from '../../src/index';
import { composeTelemetry } from '../../src/integrations/compose-telemetry';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { code } from './langgraph-harness';
import { model, observed, openWaypoint, readCalls, resetModel, Research, scenario, TURNS, type ResearchState } from './ai-agent';

const defaults = { ...scenario };
let waypoint: Waypoint;
let removeFile: () => void;

async function open(telemetry?: Telemetry): Promise<Waypoint> {
  const { file, remove } = tempSqlitePath();
  removeFile = remove;
  return (waypoint = await openWaypoint({ kind: 'sqlite', file }, telemetry));
}

/** Runs the loop once with every call recorded, then fails the step (so a resume replays the whole loop). */
async function recordAndFail(runId: string): Promise<void> {
  scenario.failAfterLoop = true;
  await assert.rejects(waypoint.run(Research, { runId, input: {} }), code('STEP_FAILED', 'stopped after the loop'));
  scenario.failAfterLoop = false;
}

const calls = () => model.doGenerateCalls.length + model.doStreamCalls.length;

beforeEach(() => {
  Object.assign(scenario, defaults);
  resetModel();
});
afterEach(async () => {
  await waypoint?.close();
  removeFile?.();
});

describe('waypoint/ai: streamText, changed requests, token accounting (SQLite)', () => {
  it('streamText: a recorded call is replayed as a stream with the same parts, and the provider is not called', async () => {
    await open();
    scenario.stream = true;
    await recordAndFail('s1');
    assert.equal(model.doStreamCalls.length, TURNS);
    const live = observed.streamedParts;
    assert.ok(live.includes(' answer'), 'the final text streamed word by word');
    observed.streamedParts = [];
    const result = await waypoint.resume('s1');
    assert.equal(result.status, 'completed');
    assert.equal(model.doStreamCalls.length, TURNS, 'no call made again');
    assert.deepEqual(observed.streamedParts, live, 'the replay streamed the same parts, in order');
    const state = result.state as ResearchState;
    assert.equal(state.answer, `final answer after ${TURNS - 1} tool calls`);
    assert.equal(state.toolResults?.length, TURNS - 1);
    assert.equal(
      (state.totalUsage as { inputTokens: number }).inputTokens,
      Array.from({ length: TURNS }, (_, i) => 20 + 15 * (i + 1)).reduce((a, b) => a + b),
    );
  });

  for (const [what, change, difference] of [
    ['prompt', () => void (scenario.topic = 'something else'), 'prompt message 0 (user) differs; now: [{"type":"text","text":"Research something else"}]'],
    ['tool set', () => void (scenario.extraTool = true), "the tools differ at tool 2 'fetchPage' (2 recorded, 3 now)"],
    ['model', () => void ((scenario.modelId = 'mock-research-2'), resetModel()), 'the model differs (modelId is now "mock-research-2")'],
  ] as const) {
    it(`a changed ${what} is refused with DURABLE_REQUEST_CHANGED, no call is made, and reverting it resumes from the log`, async () => {
      await open();
      await recordAndFail(`c-${what}`);
      change();
      const before = calls();
      const err = await waypoint.resume(`c-${what}`).catch((e: unknown) => e);
      assert.ok(err instanceof DurableRequestChangedError, String(err));
      assert.equal(err.code, 'DURABLE_REQUEST_CHANGED');
      assert.equal(err.step, 'Researcher/research');
      assert.equal(err.call, 'ai:model');
      assert.equal(err.difference, difference, 'the error names what differs');
      assert.ok(err.message.includes(difference));
      assert.equal(calls(), before, 'the changed request was not sent');
      Object.assign(scenario, defaults);
      resetModel();
      assert.equal((await waypoint.resume(`c-${what}`)).status, 'completed');
      assert.equal(calls(), 0, 'reverted: every call came from the log');
    });
  }

  it("onRequestChange: 'rerun' pays for the changed prompt once; tool calls with unchanged input are still not run again", async () => {
    await open();
    await recordAndFail('r1');
    resetModel();
    scenario.topic = 'another topic';
    scenario.policy = 'rerun';
    const dir = mkdtempSync(path.join(tmpdir(), 'waypoint-ai-rerun-'));
    scenario.log = path.join(dir, 'calls.log');
    try {
      const result = await waypoint.resume('r1');
      assert.equal(result.status, 'completed');
      assert.equal(model.doGenerateCalls.length, TURNS, 'every model call made again for the new prompt');
      assert.match(JSON.stringify(model.doGenerateCalls[0].prompt), /another topic/);
      assert.deepEqual(
        readCalls(scenario.log).filter((c) => c.kind === 'tool'),
        [],
        'same tool inputs: recorded outputs reused',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    resetModel();
    assert.equal((await waypoint.resume('r1')).status, 'completed');
    assert.equal(model.doGenerateCalls.length, 0);
  });

  it('tokens per step: telemetry (composed) and Prometheus count tokens spent and saved by kind; runs show and the run page show them', async () => {
    const telemetry = new PrometheusTelemetry();
    const seen: ModelCallEvent[] = [];
    // Not a NoopTelemetry subclass: composeTelemetry drops those as inert.
    const noop = new NoopTelemetry();
    const counting: Telemetry = {
      runStarted: () => undefined,
      stepCompleted: () => undefined,
      stepFailed: () => undefined,
      sideEffect: () => undefined,
      runEnded: () => undefined,
      leaseLost: () => undefined,
      span: (name, attributes, fn) => noop.span(name, attributes, fn),
      modelCall: (event) => void seen.push(event),
    };
    await open(composeTelemetry(telemetry, counting));
    await recordAndFail('t1');
    assert.equal((await waypoint.resume('t1')).status, 'completed');
    const metric = async (name: string) => (await telemetry.registry.getSingleMetric(name)!.get()).values.map((v) => [v.labels, v.value]);
    const input = Array.from({ length: TURNS }, (_, i) => 20 + 15 * (i + 1)).reduce((a, b) => a + b);
    const tokens = await metric('waypoint_model_tokens_total');
    assert.deepEqual(
      tokens.sort(),
      [
        [{ kind: 'input', outcome: 'executed' }, input],
        [{ kind: 'input', outcome: 'reused' }, input],
        [{ kind: 'output', outcome: 'executed' }, 7 * TURNS],
        [{ kind: 'output', outcome: 'reused' }, 7 * TURNS],
      ].sort(),
    );
    assert.ok(
      tokens.every(([labels]) => !('runId' in (labels as object))),
      'no run ids in labels',
    );
    assert.deepEqual(
      (await metric('waypoint_model_calls_total')).sort(),
      [
        [{ outcome: 'executed' }, TURNS],
        [{ outcome: 'reused' }, TURNS],
      ].sort(),
    );

    assert.deepEqual(
      seen.map((e) => e.outcome),
      [...Array<string>(TURNS).fill('executed'), ...Array<string>(TURNS).fill('reused')],
      'composed telemetry forwards every model call',
    );
    assert.ok(seen.every((e) => e.runId === 't1' && e.step === 'Researcher/research'));

    const loaded = (await waypoint.store.loadRun('t1'))!;
    const operations = await waypoint.store.listOperations('t1');
    const text = renderShow(loaded.run, buildTimeline(loaded.run, loaded.steps, operations, { integrity: {} }), new Date());
    const total = (input + 7 * TURNS).toLocaleString('en-US');
    assert.ok(
      text.includes(
        `ai: ${TURNS} model call(s), ${total} tokens (${input.toLocaleString('en-US')} in, ${7 * TURNS} out), ${TURNS - 1} tool call(s); not repeated on resume: ${TURNS} model call(s), ${total} tokens`,
      ),
      text,
    );
    assert.ok(!text.includes('durable:ai:'), 'the calls are summed, not listed one by one');
    const page = runDetail(loaded, operations, { integrity: {}, now: new Date(), actionsAllowed: false, plan: undefined });
    assert.deepEqual(page.steps[0].ai?.reused, { modelCalls: TURNS, inputTokens: input, outputTokens: 7 * TURNS, toolCalls: TURNS - 1 });
  });
});
