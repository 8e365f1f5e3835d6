/**
 * The `--module` of the progress tests (issue 35): a loop and a forEach, each step with a side effect.
 * WAYPOINT_PROGRESS_FAIL names a forEach item that fails, or `draft` to fail the loop's second iteration.
 */
import 'reflect-metadata';
import { IsOptional } from 'class-validator';
import { Agent, NonRetryableError, Pipeline, SideEffect, Step, forEach, loop, type StepContext } from '../../src/index';

export class ProgressState {
  @IsOptional() n?: number;
  @IsOptional() items?: string[];
  @IsOptional() reviews?: unknown[];
  @IsOptional() published?: boolean;
}

class Planner extends Agent {
  @Step() plan() {
    return { n: 0 };
  }
}
class Draft extends Agent {
  @SideEffect({ name: 'save-draft' }) save(n: number): Promise<number> {
    return Promise.resolve(n);
  }
  @Step() async write(ctx: StepContext<ProgressState>) {
    const n = ctx.state.n ?? 0;
    if (n === 1 && process.env.WAYPOINT_PROGRESS_FAIL === 'draft') throw new NonRetryableError('draft 1 refused');
    await this.save(n);
    return { n: n + 1 };
  }
}
class Reviewer extends Agent {
  @SideEffect({ name: 'notify' }) notify(item: string): Promise<string> {
    return Promise.resolve(item);
  }
  @Step() async review(ctx: StepContext<ProgressState>) {
    const item = String(ctx.item);
    if (item === process.env.WAYPOINT_PROGRESS_FAIL) throw new NonRetryableError(`cannot review ${item}`);
    await this.notify(item);
    return { item };
  }
}
class Publisher extends Agent {
  @Step() publish() {
    return { published: true };
  }
}

@Pipeline({
  name: 'progress-tree',
  version: '1',
  state: ProgressState,
  agents: [
    Planner,
    loop({ until: (s: ProgressState) => (s.n ?? 0) >= 3, maxIterations: 5 }, Draft),
    forEach((s: ProgressState) => s.items ?? [], Reviewer, { into: 'reviews', concurrency: 1 }),
    Publisher,
  ],
})
export class ProgressTree {}

export const pipelines = [ProgressTree];
