/**
 * The pipeline of the alteration suite, and the `--module` its CLI checks give `waypoint-durable runs resume`:
 * two agents of two steps; each step's output and memory carry the run id, so a payload transplanted
 * from another run differs from the one it replaces. A run whose id starts with `failed` fails for good
 * at its third step; `hooks.onStep` lets the suite pause a run (in its own process only).
 */
import 'reflect-metadata';
import { Agent, NonRetryableError, Pipeline, Step, type StepContext } from '../../src/index';

export const hooks: { onStep?: (runId: string, index: number) => void } = {};

interface Counted {
  count?: number;
}

function step(agent: Agent<Counted>, ctx: StepContext, index: number): Promise<Record<string, string>> {
  hooks.onStep?.(ctx.runId, index);
  if (ctx.runId.startsWith('failed') && index === 2) return Promise.reject(new NonRetryableError(`step ${index + 1} of '${ctx.runId}' fails for good`));
  agent.memory.count = (agent.memory.count ?? 0) + 1;
  return Promise.resolve({ [`s${index + 1}`]: `${ctx.runId}:${index + 1}:payload` });
}

class Gatherer extends Agent<Counted> {
  @Step() async gather(ctx: StepContext) {
    return step(this, ctx, 0);
  }
  @Step() async sift(ctx: StepContext) {
    return step(this, ctx, 1);
  }
}

class Writer extends Agent<Counted> {
  @Step() async draft(ctx: StepContext) {
    return step(this, ctx, 2);
  }
  @Step() async polish(ctx: StepContext) {
    return step(this, ctx, 3);
  }
}

@Pipeline({ name: 'alterations', version: '1.0.0', agents: [Gatherer, Writer] })
export class Alterations {}

export const pipelines = [Alterations];
