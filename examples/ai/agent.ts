import 'reflect-metadata';
import { writeSync } from 'node:fs';
import { injectable } from 'inversify';
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { currentOperation, durableModel, durableTools, type WrappableModel } from 'waypoint-durable/ai';
import { Agent, Pipeline, Step, type StepContext } from 'waypoint-durable';

/**
 * The research agent of `npm run demo:ai`: plain AI SDK code (generateText, tools, stopWhen) with the
 * model and the tools wrapped by `durableModel` / `durableTools`. Every tool execution prints a `TOOL`
 * line (written synchronously, so a killed process has told what it ran); WAYPOINT_AI_KILL_AT_TOOL=N makes
 * the process SIGKILL itself inside its Nth tool execution.
 */
export const MAX_TURNS = 10;

let toolRuns = 0;
function note(name: string): void {
  writeSync(1, `TOOL ${name}\n`);
}

/** Search results from a fixed corpus: the tools are local, so only the model may need the network. */
const corpus: Record<string, string> = {
  checkpointing: 'Checkpointing writes progress durably so a crashed process resumes instead of restarting.',
  idempotency: 'An idempotency key lets an external system recognise a repeated request and apply it once.',
  leases: 'A lease with a fencing epoch makes sure only one worker advances a run at a time.',
  'tool loops': 'An agent tool loop alternates model calls and tool executions until the model answers.',
};

const tools = {
  search: tool({
    description: 'Searches the knowledge base for a topic and returns a short passage.',
    inputSchema: jsonSchema<{ topic: string }>({ type: 'object', properties: { topic: { type: 'string' } }, required: ['topic'] }),
    execute: ({ topic }: { topic: string }) => {
      note(`search(${topic})`);
      if (++toolRuns === Number(process.env.WAYPOINT_AI_KILL_AT_TOOL)) process.kill(process.pid, 'SIGKILL');
      return { topic, passage: corpus[topic] ?? `nothing found about ${topic}` };
    },
  }),
  saveNote: tool({
    description: 'Saves a research note (an external write: it carries an idempotency key).',
    inputSchema: jsonSchema<{ text: string }>({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }),
    execute: ({ text }: { text: string }) => {
      // The key is the same on every resume of this call: a notes service would dedupe on it.
      const key = currentOperation().key.slice(0, 12);
      note(`saveNote(${key})`);
      if (++toolRuns === Number(process.env.WAYPOINT_AI_KILL_AT_TOOL)) process.kill(process.pid, 'SIGKILL');
      return { saved: text.length, key };
    },
  }),
};

/** The deterministic stand-in for a provider: it searches each topic, saves a note, then answers. */
function mockModel(): MockLanguageModelV4 {
  const topics = Object.keys(corpus);
  return new MockLanguageModelV4({
    provider: 'mock',
    modelId: 'mock-researcher',
    doGenerate: async (options) => {
      const done = options.prompt.filter((m) => m.role === 'tool').length;
      const inputTokens = 40 + 30 * done;
      const usage = {
        inputTokens: { total: inputTokens, noCache: inputTokens, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 12, text: 12, reasoning: undefined },
      };
      const call = (name: string, input: unknown) => ({ type: 'tool-call' as const, toolCallId: `call-${done + 1}`, toolName: name, input: JSON.stringify(input) });
      const content =
        done < topics.length
          ? [call('search', { topic: topics[done] })]
          : done === topics.length
            ? [call('saveNote', { text: `notes on ${topics.join(', ')}` })]
            : [{ type: 'text' as const, text: `Durable pipelines combine ${topics.join(', ')}: progress survives crashes and side effects happen once.` }];
      await new Promise((r) => setTimeout(r, 50)); // a model takes a while
      return { content, finishReason: { unified: content[0].type === 'text' ? 'stop' : 'tool-calls', raw: undefined }, usage, warnings: [] };
    },
  });
}

/**
 * The model: the mock, or a real provider when WAYPOINT_AI_PROVIDER names one (e.g. `openai`, with
 * WAYPOINT_AI_MODEL=gpt-4.1-mini): its package `@ai-sdk/<provider>` must be installed (it is not a
 * dependency of Waypoint). Returns a string saying what is missing instead when it is not.
 */
export function chooseModel(): { model: WrappableModel; label: string } | { missing: string } {
  const provider = process.env.WAYPOINT_AI_PROVIDER;
  if (!provider) return { model: mockModel(), label: 'mock model (no network)' };
  const pkg = `@ai-sdk/${provider}`;
  let mod: Record<string, unknown>;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- an optional provider package named at run time, loaded only when WAYPOINT_AI_PROVIDER asks for it
    mod = require(pkg) as Record<string, unknown>;
  } catch {
    return { missing: `WAYPOINT_AI_PROVIDER=${provider} needs the package ${pkg}, which is not installed (npm install ${pkg}; Waypoint does not depend on provider packages).` };
  }
  const factory = mod[provider] ?? mod.default;
  const modelId = process.env.WAYPOINT_AI_MODEL;
  if (typeof factory !== 'function' || !modelId) return { missing: `${pkg} is installed; set WAYPOINT_AI_MODEL to a model id of ${provider} (and its API key variable).` };
  return { model: (factory as (id: string) => WrappableModel)(modelId), label: `${provider} ${modelId}` };
}

let chosen: WrappableModel | undefined;
export function useModel(model: WrappableModel): void {
  chosen = model;
}

@injectable()
export class Researcher extends Agent {
  @Step()
  async research(ctx: StepContext<{ question: string }>) {
    const r = await generateText({
      model: durableModel(ctx, chosen!),
      tools: durableTools(ctx, tools),
      stopWhen: stepCountIs(MAX_TURNS),
      system:
        'You are a researcher. Search each of these topics with the search tool, one call at a time: checkpointing, idempotency, leases, tool loops. Then save one note with saveNote. Then answer in two sentences.',
      prompt: ctx.state.question,
      abortSignal: ctx.signal,
    });
    return { answer: r.text, turns: r.steps.length, totalTokens: r.totalUsage.totalTokens ?? 0 };
  }
}

@Pipeline({ name: 'ai-research-demo', version: '1.0.0', agents: [Researcher] })
export class ResearchDemo {}
