import 'reflect-metadata';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { ContainerModule, injectable } from 'inversify';
import { APICallError, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV4, convertArrayToReadableStream } from 'ai/test';
import { currentOperation, durableModel, durableTools, type DurableAiOptions } from '../../src/integrations/ai';
import { Agent, NonRetryableError, Pipeline, Step, TOKENS, Waypoint, postgresStorage, sqliteStorage, type Logger, type StepContext, type Telemetry } from '../../src/index';

/**
 * The research agent of the AI SDK tests: a 12-turn tool loop over a mock model from `ai/test`. The mock
 * answers from the prompt alone (turn = tool results so far + 1), so a resumed process gets the same
 * answers; every model call and tool execution is appended to a log file, which survives SIGKILL and lets
 * the test count calls across processes.
 */
export const TURNS = 12;

/** Knobs of the scenario, set by the test or the worker's environment. */
export const scenario = {
  /** Append-only call log (one JSON line per model call / tool execution), or '' for none. */
  log: '',
  /** `model@N` / `tool@N`: SIGKILL this process inside the Nth turn's model call / tool execution. */
  killAt: '',
  topic: 'durable agents',
  policy: 'error' as NonNullable<DurableAiOptions['onRequestChange']>,
  stream: false,
  /** Throw after the loop (every call recorded), so a resume replays the whole loop from the log. */
  failAfterLoop: false,
  /** Offer one more tool to the model (a changed tool set). */
  extraTool: false,
  modelId: 'mock-research-1',
  /** The turn whose tool call goes to `flaky` (0: none, and the tool is not offered). */
  flakyTurn: 0,
  /** How many runs of the `flaky` tool fail (counted in the call log across processes, else in this process). */
  flakyFailures: 1,
  /** The flaky tool's failing runs hang until the SDK's tool timeout (`toolTimeoutMs`) aborts them, then throw. */
  flakyHangs: false,
  toolTimeoutMs: 0,
  /** The turn whose first generate call fails with a provider 503 (an APICallError the SDK retries), 0: none. */
  modelFailsAtTurn: 0,
  /** durableTools' onToolError. */
  onToolError: 'record' as NonNullable<DurableAiOptions['onToolError']>,
  /** durableModel's and durableTools' `emit` (live output). */
  emit: true,
};

/** What the last attempt saw, also when it failed afterwards. */
export const observed = { streamedParts: [] as string[] };

export interface CallLine {
  kind: 'model' | 'tool';
  turn: number;
  pid: number;
  tool?: string;
  key?: string;
}

export function readCalls(log: string): CallLine[] {
  if (!existsSync(log)) return [];
  return readFileSync(log, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as CallLine);
}

function note(line: Omit<CallLine, 'pid'>): void {
  if (scenario.log) appendFileSync(scenario.log, JSON.stringify({ ...line, pid: process.pid }) + '\n');
  if (scenario.killAt === `${line.kind}@${line.turn}`) process.kill(process.pid, 'SIGKILL');
}

/** Runs of the flaky tool in this process (when there is no call log to count them in). */
const flakyRuns: (number | undefined)[] = [];
/** Turns whose model call already failed once in this process. */
const failedTurns = new Set<number>();
export function resetFlaky(): void {
  flakyRuns.length = 0;
  failedTurns.clear();
}
/** How often the flaky tool ran in this process, all turns together. */
export function flakyRunCount(): number {
  return flakyRuns.reduce<number>((a, b) => a + (b ?? 0), 0);
}

type MockOptions = NonNullable<ConstructorParameters<typeof MockLanguageModelV4>[0]>;
type CallOptions = Parameters<InstanceType<typeof MockLanguageModelV4>['doGenerate']>[0];

/** Turn number from the prompt: one more than the tool results it holds. */
function turnOf(options: CallOptions): number {
  return options.prompt.filter((message) => message.role === 'tool').length + 1;
}

function usage(turn: number) {
  const input = 20 + 15 * turn;
  return { inputTokens: { total: input, noCache: input, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 7, text: 7, reasoning: undefined } };
}

/** The model's answer at a turn: a tool call before the last turn, the final text at it. */
function answer(turn: number): { toolCall?: { id: string; name: string; input: string }; text?: string } {
  if (turn < TURNS) {
    const name = turn === scenario.flakyTurn ? 'flaky' : turn % 4 === 0 ? 'notify' : 'search';
    return { toolCall: { id: `call-${turn}`, name, input: JSON.stringify({ query: `q${turn}` }) } };
  }
  return { text: `final answer after ${TURNS - 1} tool calls` };
}

/** A fresh mock model (counting its own calls in `doGenerateCalls` / `doStreamCalls`). */
export function mockModel(): MockLanguageModelV4 {
  return new MockLanguageModelV4({
    provider: 'mock',
    modelId: scenario.modelId,
    doGenerate: (options) => {
      const turn = turnOf(options);
      note({ kind: 'model', turn });
      if (turn === scenario.modelFailsAtTurn && !failedTurns.has(turn)) {
        failedTurns.add(turn);
        return Promise.reject(new APICallError({ message: 'Service Unavailable', url: 'https://mock.invalid/v1', requestBodyValues: {}, statusCode: 503 }));
      }
      const a = answer(turn);
      return Promise.resolve({
        content: a.toolCall ? [{ type: 'tool-call', toolCallId: a.toolCall.id, toolName: a.toolCall.name, input: a.toolCall.input }] : [{ type: 'text', text: a.text! }],
        finishReason: { unified: a.toolCall ? 'tool-calls' : 'stop', raw: undefined },
        usage: usage(turn),
        warnings: [],
        response: { id: `resp-${turn}`, timestamp: new Date(1_700_000_000_000 + turn), modelId: 'mock-research-1' },
      });
    },
    doStream: (options) => {
      const turn = turnOf(options);
      note({ kind: 'model', turn });
      const a = answer(turn);
      const body = a.toolCall
        ? [{ type: 'tool-call' as const, toolCallId: a.toolCall.id, toolName: a.toolCall.name, input: a.toolCall.input }]
        : [
            { type: 'text-start' as const, id: 't1' },
            ...a.text!.split(' ').map((word, i) => ({ type: 'text-delta' as const, id: 't1', delta: i === 0 ? word : ` ${word}` })),
            { type: 'text-end' as const, id: 't1' },
          ];
      return Promise.resolve({
        stream: convertArrayToReadableStream([
          { type: 'stream-start', warnings: [] },
          { type: 'response-metadata', id: `resp-${turn}`, timestamp: new Date(1_700_000_000_000 + turn), modelId: 'mock-research-1' },
          ...body,
          { type: 'finish', finishReason: { unified: a.toolCall ? 'tool-calls' : 'stop', raw: undefined }, usage: usage(turn) },
        ]),
      });
    },
  } satisfies MockOptions);
}

/** The model of the current process (tests read its call counts). */
export let model = mockModel();
export function resetModel(): void {
  model = mockModel();
}

const queryInput = jsonSchema<{ query: string }>({ type: 'object', properties: { query: { type: 'string' } }, required: ['query'] });

export const tools = {
  search: tool({
    description: 'search the web',
    inputSchema: queryInput,
    execute: ({ query }: { query: string }) => {
      note({ kind: 'tool', turn: Number(query.slice(1)), tool: 'search' });
      return { hits: [`${query}: result A`, `${query}: result B`] };
    },
  }),
  notify: tool({
    description: 'send a message (a side effect: passes its idempotency key on)',
    inputSchema: queryInput,
    execute: ({ query }: { query: string }) => {
      // The key is the external system's dedupe key: the same on every resume of this call.
      const key = currentOperation().key;
      note({ kind: 'tool', turn: Number(query.slice(1)), tool: 'notify', key });
      return { sent: query, key };
    },
  }),
};

/**
 * A tool with a side effect that fails upstream (a 503) after doing its work, the first
 * `scenario.flakyFailures` times it runs: its work is noted in the call log before it throws.
 */
export const flaky = tool({
  description: 'search a flaky upstream',
  inputSchema: queryInput,
  execute: async ({ query }: { query: string }, { abortSignal }) => {
    const turn = Number(query.slice(1));
    const before = scenario.log ? readCalls(scenario.log).filter((c) => c.tool === 'flaky' && c.turn === turn).length : (flakyRuns[turn] ?? 0);
    flakyRuns[turn] = before + 1;
    note({ kind: 'tool', turn, tool: 'flaky' });
    if (before < scenario.flakyFailures && scenario.flakyHangs) {
      // AbortSignal.timeout's timer does not keep the process alive: this one does, until the abort.
      const alive = setInterval(() => undefined, 1000);
      await new Promise((resolve) => abortSignal?.addEventListener('abort', resolve, { once: true })).finally(() => clearInterval(alive));
      throw new Error(`upstream did not answer ${query}`);
    }
    if (before < scenario.flakyFailures) throw new Error(`upstream 503 for ${query}`);
    return { hits: [`${query}: flaky result`] };
  },
});

function offeredTools() {
  const offered = scenario.flakyTurn > 0 ? { ...tools, flaky } : tools;
  return scenario.extraTool ? { ...offered, fetchPage: tools.search } : offered;
}

export interface ResearchState {
  topic?: string;
  answer?: string;
  toolResults?: unknown[];
  totalUsage?: unknown;
  streamedParts?: string[];
  toolErrors?: string[];
}

@injectable()
export class Researcher extends Agent {
  @Step()
  async research(ctx: StepContext<ResearchState>) {
    const common = {
      model: durableModel(ctx, model, { onRequestChange: scenario.policy, emit: scenario.emit }),
      tools: durableTools(ctx, offeredTools(), { onRequestChange: scenario.policy, onToolError: scenario.onToolError, emit: scenario.emit }),
      stopWhen: stepCountIs(TURNS),
      prompt: `Research ${scenario.topic}`,
      abortSignal: ctx.signal,
      ...(scenario.toolTimeoutMs > 0 ? { timeout: { toolMs: scenario.toolTimeoutMs } } : {}),
    };
    if (scenario.stream) {
      const result = streamText(common);
      const streamedParts: string[] = [];
      for await (const part of result.fullStream)
        if (part.type === 'text-delta' || part.type === 'tool-call' || part.type === 'tool-result')
          streamedParts.push(part.type === 'text-delta' ? part.text : `${part.type}:${part.toolCallId}`);
      observed.streamedParts = streamedParts;
      const steps = await result.steps;
      if (scenario.failAfterLoop) throw new NonRetryableError('stopped after the loop');
      return {
        answer: await result.text,
        toolResults: steps.flatMap((s) => s.toolResults.map((t) => t.output)),
        totalUsage: await result.totalUsage,
        streamedParts,
        toolErrors: toolErrorsOf(steps),
      };
    }
    const r = await generateText(common);
    if (scenario.killAt === 'after-loop') process.kill(process.pid, 'SIGKILL');
    if (scenario.failAfterLoop) throw new NonRetryableError('stopped after the loop');
    return { answer: r.text, toolResults: r.steps.flatMap((s) => s.toolResults.map((t) => t.output)), totalUsage: r.totalUsage, toolErrors: toolErrorsOf(r.steps) };
  }
}

/** The errors the tool calls of the loop threw, as `Name: message` (what the SDK showed the model). */
function toolErrorsOf(steps: { content: readonly { type: string; error?: unknown }[] }[]): string[] {
  return steps.flatMap((s) => s.content.flatMap((part) => (part.type === 'tool-error' ? [String(part.error)] : [])));
}

@Pipeline({ name: 'ai-research', version: '1.0.0', agents: [Researcher] })
export class Research {}

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** Where the run is stored: a SQLite file or a PostgreSQL schema. */
export type StoreSpec = { kind: 'sqlite'; file: string } | { kind: 'postgres'; url: string; schema: string };

export async function openWaypoint(spec: StoreSpec, telemetry?: Telemetry): Promise<Waypoint> {
  const storage = spec.kind === 'sqlite' ? sqliteStorage({ path: spec.file }) : postgresStorage({ url: spec.url, schema: spec.schema });
  const extras = new ContainerModule(({ bind }) => {
    bind(TOKENS.Logger).toConstantValue(silent);
    if (telemetry) bind(TOKENS.Telemetry).toConstantValue(telemetry);
  });
  return Waypoint.create({ modules: [storage, extras], pipelines: [Research] });
}
