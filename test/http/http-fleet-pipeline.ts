import 'reflect-metadata';
import { IsOptional, IsString } from 'class-validator';
import { Agent, Pipeline, Step, type StepContext } from '../../src/index';

// The pipeline of the fleet test: one step that writes its answer slowly, part by part, like a model
// streaming tokens, so a worker can be killed in the middle of it.

export class StoryState {
  @IsString() topic!: string;
  @IsOptional() story?: string;
}

export const STORY_PARTS = 12;

class Writer extends Agent {
  @Step() async write(ctx: StepContext<StoryState>) {
    const worker = process.env.HTTP_WORKER ?? 'test';
    // The worker process tells the test when the step's signal aborts (a cancel seen from another process).
    ctx.signal.addEventListener('abort', () => process.stdout.write(JSON.stringify({ event: 'aborted', runId: ctx.runId }) + '\n'), { once: true });
    for (let i = 0; i < STORY_PARTS; i++) {
      if (ctx.signal.aborted) throw ctx.signal.reason as Error;
      ctx.emit({ worker, i });
      await new Promise((resolve) => setTimeout(resolve, 120));
    }
    return { story: `${ctx.state.topic}, by ${worker}` };
  }
}

@Pipeline({ name: 'http-story', version: '1.0.0', state: StoryState, agents: [Writer] })
export class HttpStory {}
