import 'reflect-metadata';
import { IsOptional, IsString } from 'class-validator';
import { Agent, Pipeline, Step, type StepContext } from '../../src/index';

// Pipelines the HTTP tests start over the handler.

export class ChatState {
  @IsString() question!: string;
  @IsOptional() answer?: string;
  /** Kept on the server: the handler's clientView leaves it out. */
  @IsOptional() apiTrace?: string;
  @IsOptional() decision?: unknown;
}

class Answerer extends Agent {
  @Step() answer(ctx: StepContext<ChatState>) {
    const words = `echo: ${ctx.state.question}`.split(' ');
    for (const word of words) ctx.emit({ text: word });
    return { answer: words.join(' '), apiTrace: 'secret-trace-123' };
  }
}

class Approver extends Agent {
  @Step() async decide(ctx: StepContext<ChatState>) {
    return { decision: await ctx.waitFor<unknown>('approval') };
  }
}

/** Answers (emitting one part per word), then waits for signal 'approval'. */
@Pipeline({ name: 'http-chat', version: '1.0.0', state: ChatState, agents: [Answerer, Approver] })
export class HttpChat {}

export class HoldState {
  @IsOptional() @IsString() topic?: string;
  @IsOptional() done?: boolean;
}

/** What the cancel test observes of the step in flight. */
export const holdProbe = { started: null as (() => void) | null, abortedWith: null as unknown };

class Holder extends Agent {
  /** Emits a part, then holds like a model call in flight until its ctx.signal aborts. */
  @Step() async hold(ctx: StepContext<HoldState>) {
    ctx.emit({ text: 'thinking' });
    holdProbe.started?.();
    await new Promise((_, reject) =>
      ctx.signal.addEventListener(
        'abort',
        () => {
          holdProbe.abortedWith = ctx.signal.reason;
          reject(ctx.signal.reason as Error);
        },
        { once: true },
      ),
    );
    return { done: true };
  }
}

/** One step that holds until aborted (the stop button's target). */
@Pipeline({ name: 'http-hold', version: '1.0.0', state: HoldState, agents: [Holder] })
export class HttpHold {}

export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** Parses a whole SSE body into its messages (comments and `retry:` lines skipped). */
export function parseSse(text: string): SseMessage[] {
  const messages: SseMessage[] = [];
  for (const block of text.split('\n\n')) {
    const message: SseMessage = { data: '' };
    let any = false;
    for (const line of block.split('\n')) {
      const field = /^(id|event|data): (.*)$/.exec(line);
      if (!field) continue;
      message[field[1] as 'id' | 'event' | 'data'] = field[2];
      any = true;
    }
    if (any) messages.push(message);
  }
  return messages;
}
