import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { DurableRequestChangedError } from '../../src/integrations/ai';
import type { Waypoint } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { code } from './langgraph-harness';
import { flakyRunCount as flakyRuns, model, openWaypoint, resetFlaky, resetModel, Research, scenario, TURNS, type ResearchState } from './ai-agent';

const defaults = { ...scenario };
const FLAKY_TURN = 3;
const TOOL_ERROR = `Error: upstream 503 for q${FLAKY_TURN}`;
let waypoint: Waypoint;
let removeFile: () => void;

async function open(): Promise<Waypoint> {
  const { file, remove } = tempSqlitePath();
  removeFile = remove;
  return (waypoint = await openWaypoint({ kind: 'sqlite', file }));
}

/** Runs the loop once (the flaky tool failing once at turn 3), then fails the step after the loop. */
async function recordAndFail(runId: string): Promise<void> {
  scenario.failAfterLoop = true;
  await assert.rejects(waypoint.run(Research, { runId, input: {} }), code('STEP_FAILED', 'stopped after the loop'));
  scenario.failAfterLoop = false;
}

type Prompt = { role: string; content: unknown }[];
const prompts = (): Prompt[] => [...model.doGenerateCalls, ...model.doStreamCalls].map((c) => c.prompt as Prompt);

/** The tool-error text the model was shown for the flaky call, read from the prompt of the next model call. */
function errorShownToModel(prompt: Prompt): unknown {
  const toolMessage = prompt.filter((m) => m.role === 'tool')[FLAKY_TURN - 1];
  const part = (toolMessage.content as { type: string; toolName: string; output: { type: string; value: unknown } }[])[0];
  assert.equal(part.toolName, 'flaky');
  assert.equal(part.output.type, 'error-text');
  return part.output.value;
}

beforeEach(() => {
  Object.assign(scenario, defaults, { flakyTurn: FLAKY_TURN });
  resetModel();
  resetFlaky();
});
afterEach(async () => {
  await waypoint?.close();
  removeFile?.();
});

const modelCalls = () => model.doGenerateCalls.length + model.doStreamCalls.length;

describe('waypoint/ai: a tool that threw is replayed as its error (SQLite)', () => {
  for (const stream of [false, true]) {
    it(`${stream ? 'streamText' : 'generateText'}: the resume throws the recorded 503 again, runs the tool 0 more times, calls no model, and completes with the recorded text`, async () => {
      scenario.stream = stream;
      await open();
      await recordAndFail(`flaky-${stream}`);
      const first = prompts();
      assert.equal(first.length, TURNS);
      // The model saw the tool's own error: no Waypoint wrapper, run id or operation name.
      const shown = errorShownToModel(first[FLAKY_TURN]);
      assert.equal(shown, TOOL_ERROR);
      assert.equal(flakyRuns(), 1);
      const whole = JSON.stringify(first);
      for (const leak of ['SideEffectFailedError', `flaky-${stream}`, 'durable:', 'Side effect']) assert.ok(!whole.includes(leak), `no '${leak}' in any prompt`);

      resetModel();
      const result = await waypoint.resume(`flaky-${stream}`);
      assert.equal(result.status, 'completed');
      assert.equal(modelCalls(), 0, 'every model call came from the log');
      assert.equal(flakyRuns(), 1, 'the tool (whose work was done before it threw) did not run again');
      const state = result.state as ResearchState;
      assert.equal(state.answer, `final answer after ${TURNS - 1} tool calls`);
      assert.deepEqual(state.toolErrors, [TOOL_ERROR], 'the step saw the same tool error on resume');
      assert.equal(state.toolResults?.length, TURNS - 2, 'the other tool calls returned their recorded outputs');
    });
  }

  it("onToolError: 'rerun' runs the tool again; it now succeeds, so the next recorded model call is refused, naming the differing prompt message", async () => {
    scenario.onToolError = 'rerun';
    await open();
    await recordAndFail('rerun-tool');
    resetModel();
    const err = await waypoint.resume('rerun-tool').catch((e: unknown) => e);
    assert.ok(err instanceof DurableRequestChangedError, String(err));
    assert.equal(err.code, 'DURABLE_REQUEST_CHANGED');
    assert.equal(err.call, `ai:model #${FLAKY_TURN + 1}`);
    // Message 0 is the user's prompt; then assistant and tool messages alternate: the flaky tool's result is message 2 * turn.
    assert.match(err.message, new RegExp(`prompt message ${2 * FLAKY_TURN} \\(tool\\) differs; now: .*flaky result`));
    assert.equal(err.difference?.startsWith(`prompt message ${2 * FLAKY_TURN} (tool)`), true);
    assert.equal(modelCalls(), 0, 'the changed request was not sent');
  });

  it("a tool stopped by the SDK's tool timeout is not recorded (an abort is a stop, not an answer): the resume runs it again, and a changed answer is refused", async () => {
    Object.assign(scenario, { flakyHangs: true, toolTimeoutMs: 50 });
    await open();
    await recordAndFail('tool-timeout');
    assert.equal(errorShownToModel(prompts()[FLAKY_TURN]), `Error: upstream did not answer q${FLAKY_TURN}`);
    resetModel();
    const err = await waypoint.resume('tool-timeout').catch((e: unknown) => e);
    assert.equal(flakyRuns(), 2, 'the timed-out tool ran again');
    assert.ok(err instanceof DurableRequestChangedError, String(err));
    assert.match(err.message, new RegExp(`prompt message ${2 * FLAKY_TURN} \\(tool\\) differs`));
  });

  it("a provider 503 on a model call is retried by the SDK itself (it sees its APICallError, not Waypoint's wrapper); the retry keeps the call's place, so a resume replays every call", async () => {
    Object.assign(scenario, { flakyTurn: 0, modelFailsAtTurn: 2 });
    await open();
    await recordAndFail('model-503');
    assert.equal(modelCalls(), TURNS + 1, 'turn 2 was called twice: the 503 and the SDK retry');
    resetModel();
    const result = await waypoint.resume('model-503');
    assert.equal(result.status, 'completed');
    assert.equal(modelCalls(), 0, 'every call came from the log: the retry was recorded in the place of the failed call');
    assert.equal((result.state as ResearchState).answer, `final answer after ${TURNS - 1} tool calls`);
  });
});
