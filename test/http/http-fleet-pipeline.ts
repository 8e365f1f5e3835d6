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
    for (let i = 0; i < STORY_PARTS; i++) {
      ctx.emit({ worker, i });
      await new Promise((resolve) => setTimeout(resolve, 120));
    }
    return { story: `${ctx.state.topic}, by ${worker}` };
  }
}

@Pipeline({ name: 'http-story', version: '1.0.0', state: StoryState, agents: [Writer] })
export class HttpStory {}
