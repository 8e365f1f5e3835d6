/**
 * The `--module` of the CLI's control-flow tests: a pipeline with parallel, loop, branch, a forEach over an
 * agent (one item fails on its first run when WAYPOINT_FLOW_FAIL names it) and a forEach over a @Pipeline.
 */
import 'reflect-metadata';
import { IsOptional } from 'class-validator';
import { Agent, NonRetryableError, Pipeline, Step, branch, forEach, loop, parallel, type StepContext } from '../../src/index';

export class FlowState {
  @IsOptional() files?: string[];
  @IsOptional() customers?: string[];
  @IsOptional() n?: number;
  @IsOptional() web?: string;
  @IsOptional() docs?: string;
  @IsOptional() escalated?: boolean;
  @IsOptional() reviews?: unknown[];
  @IsOptional() reports?: unknown[];
}

class Planner extends Agent {
  @Step() plan() {
    return {};
  }
}
class Web extends Agent {
  @Step() search() {
    return { web: 'w' };
  }
}
class Docs extends Agent {
  @Step() read() {
    return { docs: 'd' };
  }
}
class Draft extends Agent {
  @Step() write(ctx: StepContext<FlowState>) {
    return { n: (ctx.state.n ?? 0) + 1 };
  }
}
class Escalate extends Agent {
  @Step() escalate() {
    return { escalated: true };
  }
}
class Reviewer extends Agent {
  @Step({ when: (s: FlowState) => (s.files?.length ?? 0) > 0 }) review(ctx: StepContext<FlowState>) {
    if (String(ctx.item) === process.env.WAYPOINT_FLOW_FAIL) return Promise.reject(new NonRetryableError(`cannot review ${String(ctx.item)}`));
    return { file: ctx.item };
  }
}
class CustomerState {
  @IsOptional() report?: string;
}
class Reporter extends Agent {
  @Step() report(ctx: StepContext<CustomerState>) {
    return { report: `report ${String(ctx.item)}` };
  }
}

@Pipeline({ name: 'customer-report', version: '1', state: CustomerState, agents: [Reporter] })
export class CustomerReport {}

@Pipeline({
  name: 'flow-tree',
  version: '1',
  state: FlowState,
  agents: [
    Planner,
    parallel(Web, Docs),
    loop({ until: (s: FlowState) => (s.n ?? 0) >= 3, maxIterations: 5 }, Draft),
    branch((s: FlowState) => ((s.n ?? 0) >= 3 ? 'high' : 'low'), { high: Escalate, low: [] }),
    forEach((s: FlowState) => s.files ?? [], Reviewer, { into: 'reviews', concurrency: 4 }),
    forEach((s: FlowState) => s.customers ?? [], CustomerReport, { into: 'reports', concurrency: 2 }),
  ],
})
export class FlowTree {}

export const pipelines = [FlowTree];
