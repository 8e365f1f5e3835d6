import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { IsOptional, IsString } from 'class-validator';
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { currentOperation, durableModel, durableTools } from '../../src/integrations/ai';
import { Agent, Pipeline, Step, type StepContext } from '../../src/index';
import { world } from './world';

class SupportState {
  @IsString() complaint!: string;
  @IsOptional() @IsString() answer?: string;
}

type CallOptions = Parameters<InstanceType<typeof MockLanguageModelV4>['doGenerate']>[0];

/** A model that asks for one ticket, then answers. */
function supportModel(): MockLanguageModelV4 {
  return new MockLanguageModelV4({
    provider: 'mock',
    modelId: 'kit-support-1',
    doGenerate: (options: CallOptions) => {
      const first = !options.prompt.some((message) => message.role === 'tool');
      return Promise.resolve({
        content: first
          ? [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'openTicket', input: JSON.stringify({ title: 'refund' }) }]
          : [{ type: 'text', text: 'a ticket is open' }],
        finishReason: { unified: first ? 'tool-calls' : 'stop', raw: undefined },
        usage: { inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 3, text: 3, reasoning: undefined } },
        warnings: [],
        response: { id: 'resp', timestamp: new Date(1_700_000_000_000), modelId: 'kit-support-1' },
      });
    },
  });
}

const ticketInput = jsonSchema<{ title: string }>({ type: 'object', properties: { title: { type: 'string' } }, required: ['title'] });

/** The ticket API opens a ticket per request unless it is given the same request id again. */
const openTicketFreshId = tool({
  inputSchema: ticketInput,
  execute: ({ title }) => {
    world.tickets.write(randomUUID(), title);
    return Promise.resolve({ opened: title });
  },
});

const openTicketKeyed = tool({
  inputSchema: ticketInput,
  execute: ({ title }) => {
    world.tickets.write(currentOperation().key, title);
    return Promise.resolve({ opened: title });
  },
});

/** Wrong on purpose: the model's calls are recorded, but the tool's external write is not: a resumed step opens another ticket. */
class TriageUnguardedTool extends Agent {
  @Step()
  async triage(ctx: StepContext<SupportState>) {
    const { text } = await generateText({
      model: durableModel(ctx, supportModel()),
      tools: { openTicket: openTicketFreshId },
      stopWhen: stepCountIs(3),
      prompt: ctx.state.complaint,
    });
    return { answer: text };
  }
}

/** Right: the tool runs through durableTools and hands the ticket API its operation key. */
class TriageDurableTool extends Agent {
  @Step()
  async triage(ctx: StepContext<SupportState>) {
    const { text } = await generateText({
      model: durableModel(ctx, supportModel()),
      tools: durableTools(ctx, { openTicket: openTicketKeyed }),
      stopWhen: stepCountIs(3),
      prompt: ctx.state.complaint,
    });
    return { answer: text };
  }
}

@Pipeline({ name: 'kit-tool-unguarded', version: '1.0.0', state: SupportState, agents: [TriageUnguardedTool] })
export class TicketToolOutsideDurableTools {}

@Pipeline({ name: 'kit-tool-durable', version: '1.0.0', state: SupportState, agents: [TriageDurableTool] })
export class TicketToolInDurableTools {}
