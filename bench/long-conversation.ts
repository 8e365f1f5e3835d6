import { spawnSync } from 'node:child_process';
import { IsOptional } from 'class-validator';
import { injectable } from 'inversify';
import { generateText, jsonSchema, stepCountIs, tool, type ModelMessage } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { Client } from 'pg';
import { Agent, Pipeline, Reducer, Step, Waypoint, loop, postgresStorage, type StepContext } from '../src/index';
import { durableModel, durableTools } from '../src/entry/ai';
import type { BenchEnvironment } from './environment';
import { diffCounts, totalOf } from './instruments';
import { section, type Section } from './report';
import { summarize, type Summary } from './stats';

/**
 * Long conversations (issue 40): a 100-call tool loop through `durableModel` and `durableTools` on
 * PostgreSQL, whose prompt grows by one ~8 KB tool result per call to ~800 KB (~200k tokens) at call 100.
 * The mock model returns, like a real provider, the whole request body with each response (which is not
 * stored). Figures:
 * - bytes stored per model call (its operation row and its tool call's row), at call 1, 50 and 100,
 *   against the target 1.2x (response + tool result) + 2 KB, flat from call 1 to 100;
 * - resume after a SIGKILL inside call N (a child process runs the loop and kills itself when call N
 *   reaches the model): store calls and time from `waypoint.run` to the model's next call, at N = 10 and
 *   N = 100 (a constant number of store calls does not grow with N);
 * - the state's size when the loop keeps its messages in the state through `@Reducer` (one step per
 *   model call, each returning what it added): bytes per step row against the state's size.
 */
const TOOL_RESULT_BYTES = 8_000;

/** The scenario, set by the parent or the child task. */
const scenario = { calls: 100, killAt: 0, modelCalls: 0, raw: false, onCall: null as null | ((n: number) => void) };

/** The model's call number from its prompt: one more than the tool results it holds. */
function callNumber(prompt: readonly { role: string }[]): number {
  return prompt.filter((m) => m.role === 'tool').length + 1;
}

function mockModel(): MockLanguageModelV4 {
  return new MockLanguageModelV4({
    provider: 'mock',
    modelId: 'long-conversation',
    doGenerate: (options) => {
      const n = callNumber(options.prompt);
      scenario.modelCalls += 1;
      scenario.onCall?.(n);
      if (n === scenario.killAt) process.kill(process.pid, 'SIGKILL');
      const last = n >= scenario.calls;
      const usage = {
        inputTokens: { total: n * 2000, noCache: n * 2000, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 30, text: 30, reasoning: undefined },
      };
      return Promise.resolve({
        content: last
          ? [{ type: 'text' as const, text: `Done after ${n} calls.` }]
          : [{ type: 'tool-call' as const, toolCallId: `call-${n}`, toolName: 'readPage', input: JSON.stringify({ page: n }) }],
        finishReason: { unified: last ? ('stop' as const) : ('tool-calls' as const), raw: undefined },
        usage,
        warnings: [],
        // What a real provider hands back: the whole request (the prompt so far). durableModel drops it.
        request: { body: JSON.stringify(options.prompt) },
      });
    },
  });
}

/** A page of ~8 KB of text: what one tool call adds to the prompt. */
function page(n: number): string {
  const line = `page ${n}: the quick brown fox jumps over the lazy dog. `;
  return line.repeat(Math.ceil(TOOL_RESULT_BYTES / line.length)).slice(0, TOOL_RESULT_BYTES);
}

const readPage = tool({
  inputSchema: jsonSchema<{ page: number }>({ type: 'object', properties: { page: { type: 'number' } }, required: ['page'] }),
  execute: ({ page: n }) => Promise.resolve({ page: n, text: page(n) }),
});

@injectable()
class Researcher extends Agent {
  @Step()
  async research(ctx: StepContext): Promise<{ answer: string }> {
    // raw: the same loop without recording, the floor of the loop's own cost (the SDK's prompt handling).
    const result = await generateText({
      model: scenario.raw ? mockModel() : durableModel(ctx, mockModel()),
      tools: scenario.raw ? { readPage } : durableTools(ctx, { readPage }),
      stopWhen: stepCountIs(scenario.calls),
      prompt: 'Read the pages one by one.',
    });
    return { answer: result.text };
  }
}

@Pipeline({ name: 'bench-long-conversation', version: '1.0.0', agents: [Researcher] })
class LongConversation {}

/** The conversation kept in the state: each step one model call, its new messages merged by a reducer. */
class ConversationState {
  @IsOptional()
  @Reducer((a: ModelMessage[] = [], b: ModelMessage[] = []) => [...a, ...b])
  messages?: ModelMessage[];
}

@injectable()
class Turn extends Agent<ConversationState> {
  @Step()
  async turn(ctx: StepContext<ConversationState>): Promise<Partial<ConversationState>> {
    const messages: ModelMessage[] = ctx.state.messages?.length ? [...ctx.state.messages] : [{ role: 'user', content: 'Read the pages one by one.' }];
    const result = await generateText({ model: durableModel(ctx, mockModel()), tools: durableTools(ctx, { readPage }), messages, stopWhen: stepCountIs(1) });
    const added: ModelMessage[] = ctx.state.messages?.length ? [] : [messages[0]];
    return { messages: [...added, ...result.response.messages] };
  }
}

/** The child task: runs the loop on the schema given and SIGKILLs itself when call `killAt` reaches the model. */
export async function runLongConversationChild(argv: string[]): Promise<unknown> {
  const [url, schema, runId, killAt] = argv;
  Object.assign(scenario, { calls: 100, killAt: Number(killAt) });
  const waypoint = await Waypoint.create({ modules: [postgresStorage({ url, schema })], leaseTtlMs: 1000, heartbeatMs: 250 });
  try {
    return await waypoint.run(LongConversation, { runId, input: {} });
  } finally {
    await waypoint.close();
  }
}

@Pipeline({
  name: 'bench-conversation-state',
  version: '1.0.0',
  state: ConversationState,
  agents: [loop({ until: (s: ConversationState) => (s.messages?.length ?? 0) >= 2 * scenario.calls, maxIterations: scenario.calls }, Turn)],
})
class ConversationInState {}

interface CallBytes {
  call: number;
  /** The model call's operation row and its tool call's row: every text column, in bytes. */
  stored: number;
  /** What the call added: the response's content and the tool's output, as JSON. */
  added: number;
}

/** Bytes of the operation rows of a run, per model call (its row and its tool call's row). */
async function bytesPerCall(client: Client, schema: string, runId: string): Promise<CallBytes[]> {
  const { rows } = await client.query<{ name: string; result: string | null; bytes: number }>(
    `SELECT name, result, octet_length(operation_key) + octet_length(run_id) + octet_length(step_key) + octet_length(name) + octet_length(state)
       + coalesce(octet_length(result), 0) + coalesce(octet_length(error), 0) + 20 AS bytes
     FROM "${schema}".waypoint_operations WHERE run_id = $1 ORDER BY created_at, operation_key`,
    [runId],
  );
  const model = rows.filter((r) => r.name === 'durable:ai:model');
  const tools = new Map(rows.filter((r) => r.name.startsWith('durable:ai:tool:readPage:')).map((r) => [r.name.slice('durable:ai:tool:readPage:'.length), r]));
  return model.map((row, i) => {
    const n = i + 1;
    const toolRow = tools.get(`call-${n}`);
    const recorded = JSON.parse(row.result ?? '{}') as { response?: { result?: { content?: unknown } } };
    const toolOutput = toolRow ? (JSON.parse(toolRow.result ?? '{}') as { response?: unknown }).response : undefined;
    const added = Buffer.byteLength(JSON.stringify(recorded.response?.result?.content ?? '')) + (toolOutput === undefined ? 0 : Buffer.byteLength(JSON.stringify(toolOutput)));
    return { call: n, stored: row.bytes + (toolRow?.bytes ?? 0), added };
  });
}

interface ResumeFigure {
  killAt: number;
  /** Store calls but lease renewals and stream appends. */
  storeCalls: number;
  renewals: number;
  appends: number;
  counts: Record<string, number>;
  ms: number;
}

/** Runs the loop in a child killed inside call `killAt`, then resumes it here: store calls and time to the model's next call. */
async function resumeAt(env: BenchEnvironment, killAt: number, progress: (line: string) => void): Promise<ResumeFigure> {
  const name = `conv_resume_${killAt}`;
  const schema = env.pgSchema(name);
  const runId = `conversation-${killAt}`;
  progress(`long-conversation: child run killed inside model call ${killAt}`);
  const child = spawnSync(process.execPath, [require.resolve('./index'), '--child', 'long-conversation', env.pgUrl, schema, runId, String(killAt)], { encoding: 'utf8' });
  if (child.signal !== 'SIGKILL') throw new Error(`the child run should have been killed inside call ${killAt} (exit ${child.status}): ${child.stderr.slice(-500)}`);
  // The child's lease (1 s) must expire before another executor may take the run.
  await new Promise((resolve) => setTimeout(resolve, 1_300));
  const bw = await env.waypoint('postgres', { name });
  Object.assign(scenario, { calls: 100, killAt: 0, modelCalls: 0 });
  let started = 0;
  let before: Record<string, number> = {};
  const reached = new Promise<ResumeFigure>((resolve) => {
    scenario.onCall = (n) => {
      if (n !== killAt) return;
      const ms = performance.now() - started;
      const counts = diffCounts(bw.calls.snapshot(), before);
      // Lease renewals come with time and stream appends with the parts replayed calls emit again (batched): counted apart.
      const { renewLease = 0, setLeaseExpiry = 0, appendEvents = 0, ...records } = counts;
      resolve({ killAt, ms, counts, storeCalls: totalOf(records), renewals: renewLease + setLeaseExpiry, appends: appendEvents });
    };
  });
  before = bw.calls.snapshot();
  started = performance.now();
  const result = await bw.waypoint.run(LongConversation, { runId, input: {} });
  scenario.onCall = null;
  // Calls 1 to killAt - 1 come from the record; the model is called from killAt on.
  if (result.status !== 'completed' || scenario.modelCalls !== 100 - killAt + 1) throw new Error(`the resumed run ended ${result.status} after ${scenario.modelCalls} model calls`);
  return reached;
}

/** The loop with its messages in the state (one step per model call): step-row bytes against the state's size. */
async function stateFigure(env: BenchEnvironment, client: Client): Promise<{ lastRowBytes: number; firstRowBytes: number; stateBytes: number; steps: number }> {
  const name = 'conv_state';
  const bw = await env.waypoint('postgres', { name });
  Object.assign(scenario, { calls: 100, killAt: 0 });
  const result = await bw.waypoint.run(ConversationInState, { runId: 'conversation-state', input: {} });
  if (result.status !== 'completed') throw new Error(`the conversation-in-state run ended ${result.status}`);
  const { rows } = await client.query<{ bytes: number }>(
    `SELECT coalesce(octet_length(output), 0) + coalesce(octet_length(memory), 0) AS bytes FROM "${env.pgSchema(name)}".waypoint_steps WHERE run_id = $1 AND step_name = 'turn' ORDER BY sequence`,
    ['conversation-state'],
  );
  return { firstRowBytes: rows[0].bytes, lastRowBytes: rows.at(-1)!.bytes, stateBytes: Buffer.byteLength(JSON.stringify(result.state)), steps: rows.length };
}

export async function longConversationFigure(env: BenchEnvironment, options: { quick: boolean }, progress: (line: string) => void): Promise<Section> {
  const client = new Client({ connectionString: env.pgUrl });
  await client.connect();
  try {
    progress('long-conversation: 100-call loop');
    const bw = await env.waypoint('postgres', { name: 'conv_bytes' });
    const loopMs: Record<'raw' | 'recorded', number[]> = { raw: [], recorded: [] };
    for (let round = 0; round < (options.quick ? 1 : 3); round++) {
      for (const raw of [true, false]) {
        Object.assign(scenario, { calls: 100, killAt: 0, modelCalls: 0, raw });
        const started = performance.now();
        const result = await bw.waypoint.run(LongConversation, { runId: `conversation-${raw ? 'raw' : 'rec'}-${round}`, input: {} });
        loopMs[raw ? 'raw' : 'recorded'].push(performance.now() - started);
        if (result.status !== 'completed' || scenario.modelCalls !== 100) throw new Error(`the loop ended ${result.status} after ${scenario.modelCalls} model calls`);
      }
    }
    scenario.raw = false;
    const perCall = await bytesPerCall(client, env.pgSchema('conv_bytes'), 'conversation-rec-0');
    const resumes = [];
    for (const killAt of options.quick ? [10, 100] : [10, 50, 100]) resumes.push(await resumeAt(env, killAt, progress));
    progress('long-conversation: messages kept in the state');
    const state = await stateFigure(env, client);
    return report(perCall, resumes, state, { raw: summarize(loopMs.raw), recorded: summarize(loopMs.recorded) });
  } finally {
    await client.end();
  }
}

function report(perCall: CallBytes[], resumes: ResumeFigure[], state: Awaited<ReturnType<typeof stateFigure>>, loops: { raw: Summary; recorded: Summary }): Section {
  const out = section(
    'long-conversation',
    'Long conversation: a 100-call tool loop through durableModel + durableTools on PostgreSQL (prompt ~800 KB at call 100)',
    'one run; bytes are the text columns of the operation rows (model call + its tool call); resume: a child process SIGKILLed inside model call N, resumed here',
    ['what', 'call 1', 'call 50', 'call 99', 'target', 'verdict'],
  );
  const at = (n: number) => perCall[n - 1];
  const limit = (c: CallBytes) => 1.2 * c.added + 2048;
  const within = perCall.every((c) => c.stored <= limit(c));
  // Call 100 answers with text (no tool call): 99 is the last call of the same kind as call 1.
  const excess = perCall.map((c) => c.stored - c.added);
  const growth = excess[98] - excess[0];
  out.rows.push([
    'bytes stored per model call (with its tool call)',
    String(at(1).stored),
    String(at(50).stored),
    String(at(99).stored),
    '≤ 1.2x added + 2 KB',
    within ? 'met' : 'MISSED',
  ]);
  out.rows.push(['what the call added (response + tool result)', String(at(1).added), String(at(50).added), String(at(99).added), '', '']);
  out.rows.push([
    'stored beyond what the call added',
    String(excess[0]),
    String(excess[49]),
    String(excess[98]),
    'flat (call 99 - call 1 ≤ 2 KB)',
    growth <= 2048 ? `met (+${growth} B)` : 'MISSED',
  ]);
  out.rows.push([
    '100-call loop, raw mock / recorded (ms)',
    '',
    '',
    `${loops.raw.median.toFixed(0)} / ${loops.recorded.median.toFixed(0)}`,
    '',
    `${(loops.recorded.median / loops.raw.median).toFixed(2)}x`,
  ]);
  for (const r of resumes) {
    out.rows.push([
      `resume inside call ${r.killAt}: store calls (+ renewals, stream appends) / ms to the model`,
      '',
      '',
      `${r.storeCalls} (+${r.renewals}, +${r.appends}) / ${r.ms.toFixed(0)} ms`,
      '',
      '',
    ]);
  }
  const constant = resumes.every((r) => r.storeCalls === resumes[0].storeCalls);
  out.rows.push(['resume store calls constant in N', '', '', resumes.map((r) => r.storeCalls).join(' / '), 'equal', constant ? 'met' : 'MISSED']);
  out.rows.push([
    'messages in the state (@Reducer): step row bytes',
    String(state.firstRowBytes),
    '',
    String(state.lastRowBytes),
    `state ${state.stateBytes} B after ${state.steps} steps`,
    '',
  ]);
  out.notes.push(
    'Stored per model call: the provider result without its request and response bodies (the mock returns the whole prompt as its request body, as providers do), the SHA-256 of the request and its outline (a digest per key, per recent message and per block of older ones: O(log n) entries). ' +
      "Resume counts store calls from waypoint.run to the model being called again: a replayed step reads the run's operations once (listOperations) after its first recorded call, instead of one getOperation per call; " +
      "lease renewals (time-driven) and stream appends (the replayed tool calls emit their parts again, batched 64 a time) are counted apart. Resume times are one sample each; the time to reach call N grows with N: the SDK handles and Waypoint hashes every replayed call's prompt (the loop rows show the cost of a whole loop).",
  );
  out.figures = { perCall, resumes, state, loops };
  return out;
}
