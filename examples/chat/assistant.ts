import 'reflect-metadata';
import { createHash } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { durableModel, durableTools, type WrappableModel } from 'waypoint-durable/ai';
import { Agent, Pipeline, Step, durable, type StepContext } from 'waypoint-durable';

/**
 * The support assistant of `npm run demo:chat`: one run per chat turn. It looks the order up with a tool
 * and streams its answer (durableModel + durableTools: a resumed turn replays what was recorded); a
 * refund needs a manager, who gets an approval link by "email" (the run waits for the signal, for days if
 * need be); once approved the refund is issued, exactly once.
 */

/** A turn's state: the question in, what the turn decided and did out. */
export type TurnState = {
  chatId: string;
  question: string;
  history?: { role: 'user' | 'assistant'; text: string }[];
  answer?: string;
  refund?: number;
  approved?: boolean;
  refundRef?: string;
};

/** What the example's server gives the pipeline: where approval links point and how "email" is sent. */
export interface ChatServices {
  model: WrappableModel;
  /** The approval URL of a run (the server signs it: `waypoint.approvalLink`). */
  approvalUrl(runId: string): Promise<string>;
  /** Appends one line to the outbox file (the demo's mail server). */
  outbox: string;
}

let services: ChatServices | undefined;
export function useChatServices(given: ChatServices): void {
  services = given;
}
function svc(): ChatServices {
  if (!services) throw new Error('examples/chat: useChatServices() was not called before a run started');
  return services;
}

const orders: Record<string, { item: string; price: number; status: string }> = {
  'A-1042': { item: 'a pair of trail shoes', price: 40, status: 'delivered on 2 December, one shoe torn' },
};

const tools = {
  lookupOrder: tool({
    description: 'Looks an order up by its id.',
    inputSchema: jsonSchema<{ orderId: string }>({ type: 'object', properties: { orderId: { type: 'string' } }, required: ['orderId'] }),
    execute: ({ orderId }: { orderId: string }) => ({ orderId, ...(orders[orderId] ?? { item: 'unknown', price: 0, status: 'not found' }) }),
  }),
};

/** Answers this turn: one tool call, then a streamed answer. */
class Support extends Agent {
  @Step()
  async answer(ctx: StepContext<TurnState>) {
    const result = streamText({
      model: durableModel(ctx, svc().model),
      tools: durableTools(ctx, tools),
      stopWhen: stepCountIs(4),
      system: 'You are the support assistant of a shoe shop. Look the order up (A-1042) before you answer. Refunds need a manager; say so.',
      messages: [...(ctx.state.history ?? []).map((m) => ({ role: m.role, content: m.text })), { role: 'user' as const, content: ctx.state.question }],
      abortSignal: ctx.signal,
    });
    const answer = await result.text;
    return { answer, refund: /refund/i.test(ctx.state.question) ? 40 : 0 };
  }

  /** A refund waits for a manager: the link goes out once, however often the run resumes. */
  @Step()
  async approval(ctx: StepContext<TurnState>) {
    if (!ctx.state.refund) return {};
    await durable(ctx, 'email-approval-link', async () => {
      const url = await svc().approvalUrl(ctx.runId);
      appendFileSync(svc().outbox, JSON.stringify({ to: 'manager@shoe.example', runId: ctx.runId, url }) + '\n');
      process.stdout.write(`APPROVAL LINK ${url}\n`);
      return { sent: true };
    });
    const decision = await ctx.waitFor<{ approved?: boolean } | undefined>('approve');
    return { approved: decision?.approved !== false };
  }

  @Step()
  async refund(ctx: StepContext<TurnState>) {
    if (!ctx.state.approved) return {};
    const { refundRef } = await durable(ctx, 'issue-refund', () => ({ refundRef: `R-${createHash('sha256').update(ctx.runId).digest('hex').slice(0, 8).toUpperCase()}` }));
    const text = `The manager approved it: refund ${refundRef} of ${ctx.state.refund} EUR is on its way.`;
    ctx.emit({ type: 'text-start', id: 'refund' });
    ctx.emit({ type: 'text-delta', id: 'refund', delta: text });
    ctx.emit({ type: 'text-end', id: 'refund' });
    return { refundRef };
  }
}

@Pipeline({ name: 'support-chat', version: '1.0.0', agents: [Support] })
export class SupportChat {}

/** What the mock model saw: its calls and the abort signals that reached it (the stop button's test reads these). */
export const mockLog = { calls: 0, aborted: 0 };

/** The words of the mock's answer; a question with "long" gets a long one (to press stop during it). */
function answerWords(question: string): string[] {
  const base = 'Order A-1042 is a pair of trail shoes for 40 EUR, delivered on 2 December with one shoe torn.';
  const refund = /refund/i.test(question) ? ' A refund needs a manager, so I have asked one to approve it.' : ' Tell me if you want a refund.';
  const long = /long/i.test(question) ? ' ' + Array.from({ length: 150 }, (_, i) => `detail${i + 1}`).join(' ') + '.' : '';
  return (base + refund + long).split(/(?<= )/);
}

/** The deterministic stand-in for a provider: a tool call, then the answer streamed word by word. */
export function mockModel(wordDelayMs = 40): MockLanguageModelV4 {
  return new MockLanguageModelV4({
    provider: 'mock',
    modelId: 'mock-support',
    doStream: (options) => {
      mockLog.calls += 1;
      const sawTool = options.prompt.some((m) => m.role === 'tool');
      const last = [...options.prompt].reverse().find((m) => m.role === 'user');
      const question = last && Array.isArray(last.content) ? last.content.map((p) => ('text' in p ? p.text : '')).join('') : '';
      const usage = { inputTokens: { total: 50, noCache: 50, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 20, text: 20, reasoning: undefined } };
      const parts: unknown[] = sawTool
        ? [{ type: 'text-start', id: 't' }, ...answerWords(question).map((delta) => ({ type: 'text-delta', id: 't', delta })), { type: 'text-end', id: 't' }]
        : [{ type: 'tool-call', toolCallId: `lookup-${mockLog.calls}`, toolName: 'lookupOrder', input: JSON.stringify({ orderId: 'A-1042' }) }];
      const finish = { type: 'finish', finishReason: { unified: sawTool ? 'stop' : 'tool-calls', raw: undefined }, usage };
      return Promise.resolve({ stream: paced([{ type: 'stream-start', warnings: [] }, ...parts, finish], wordDelayMs, options.abortSignal) as never });
    },
  });
}

/** `parts` one every `delayMs`; an abort stops it at once (and is counted: the provider stopped being paid). */
function paced(parts: unknown[], delayMs: number, signal: AbortSignal | undefined): ReadableStream<unknown> {
  let i = 0;
  let timer: NodeJS.Timeout | undefined;
  return new ReadableStream({
    start(controller) {
      signal?.addEventListener('abort', () => {
        mockLog.aborted += 1;
        process.stdout.write('MODEL ABORTED\n');
        clearTimeout(timer);
        try {
          controller.error(signal.reason);
        } catch {
          // already closed
        }
      });
    },
    pull(controller) {
      return new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          if (signal?.aborted) return resolve();
          if (i < parts.length) controller.enqueue(parts[i++]);
          if (i >= parts.length) controller.close();
          resolve();
        }, delayMs);
      });
    },
  });
}
