import 'reflect-metadata';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { inject, injectable, ContainerModule, type ServiceIdentifier } from 'inversify';
import { Agent, Pipeline, Step, readPlan, type StepContext } from '../../src/index';

/**
 * How the middle step (`Cruncher/crunch`) behaves in one process:
 * - `honour`: works for `ms`, stops at once when its abort signal fires (rejects with the reason);
 * - `finish`: works for `ms`; on abort it finishes its current slice within `finishMs` and returns;
 * - `ignore`: works for `ms` and never looks at its signal (a hung call, a CPU loop in a library);
 * - `gate`: returns as soon as the file `gate` exists (the test decides the instant the step ends);
 * - `sleep`: `ctx.sleep(ms)`, the durable sleep;
 * - `wait`: `ctx.waitFor('approval', { holdMs, timeoutMs })` and returns the payload;
 * - `fail`: throws on its first `ms` attempts in this process (`ms` is a count here), then succeeds.
 */
export type CrunchMode = 'honour' | 'finish' | 'ignore' | 'gate' | 'sleep' | 'wait' | 'fail';

/** What one worker process is told about the pipeline's behaviour. */
export interface LifecycleConfig {
  /** JSON-lines execution log shared by every process of a test. */
  log: string;
  mode: CrunchMode;
  ms: number;
  /** `finish` mode: how long the step takes to wrap up after its abort signal. */
  finishMs?: number;
  /** `gate` mode: the file whose existence ends the step. */
  gate?: string;
  /** `wait` mode. */
  holdMs?: number;
  timeoutMs?: number;
}

export const LIFECYCLE_CONFIG: ServiceIdentifier<LifecycleConfig> = Symbol.for('lifecycle-test:config');

/** One line of the execution log: what a step did, in which process, when. */
export interface ExecEvent {
  pid: number;
  step: string;
  event: 'start' | 'end' | 'aborted' | 'abort-ignored' | 'finishing' | 'failed' | 'host-sigterm';
  attempt: number;
  at: number;
  detail?: unknown;
}

/** Appends synchronously, so the line is on disk before the step goes on (a SIGKILL cannot lose it). */
export function logEvent(path: string, step: string, event: ExecEvent['event'], attempt = 0, detail?: unknown): void {
  const record: ExecEvent = { pid: process.pid, step, event, attempt, at: Date.now(), ...(detail === undefined ? {} : { detail }) };
  appendFileSync(path, JSON.stringify(record) + '\n');
}

/** The execution log so far; a missing file is an empty log. */
export function readExecLog(path: string): ExecEvent[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.endsWith('}'))
    .map((line) => JSON.parse(line) as ExecEvent);
}

/** Steps that started (or ended) in process `pid`, in order: what that process executed. */
export function stepsOf(log: readonly ExecEvent[], pid: number, event: ExecEvent['event'] = 'start'): string[] {
  return log.filter((e) => e.pid === pid && e.event === event).map((e) => e.step);
}

@injectable()
class Intake extends Agent {
  constructor(@inject(LIFECYCLE_CONFIG) private readonly config: LifecycleConfig) {
    super();
  }

  @Step()
  fetch(ctx: StepContext) {
    logEvent(this.config.log, 'Intake/fetch', 'start', ctx.attempt);
    logEvent(this.config.log, 'Intake/fetch', 'end', ctx.attempt);
    return { fetched: ctx.runId };
  }
}

/** Failures of `fail` mode so far in this process. */
let failuresSoFar = 0;

@injectable()
class Cruncher extends Agent<{ runs: number }> {
  override memory = { runs: 0 };

  constructor(@inject(LIFECYCLE_CONFIG) private readonly config: LifecycleConfig) {
    super();
  }

  @Step({ retries: { maxAttempts: 3, initialDelayMs: 10, jitter: false } })
  async crunch(ctx: StepContext) {
    const { log, mode, ms } = this.config;
    const key = 'Cruncher/crunch';
    logEvent(log, key, 'start', ctx.attempt, { mode });
    this.memory.runs += 1;
    let extra: Record<string, unknown> = {};
    switch (mode) {
      case 'honour':
        try {
          await abortable(ms, ctx.signal);
        } catch (reason) {
          logEvent(log, key, 'aborted', ctx.attempt);
          throw reason;
        }
        break;
      case 'finish':
        try {
          await abortable(ms, ctx.signal);
        } catch {
          logEvent(log, key, 'finishing', ctx.attempt);
          await delay(this.config.finishMs ?? 50);
        }
        break;
      case 'ignore':
        ctx.signal.addEventListener('abort', () => logEvent(log, key, 'abort-ignored', ctx.attempt), { once: true });
        await delay(ms);
        break;
      case 'gate':
        while (!existsSync(this.config.gate!)) await delay(5);
        break;
      case 'sleep':
        await ctx.sleep(ms);
        break;
      case 'wait':
        extra = { approval: await ctx.waitFor('approval', { holdMs: this.config.holdMs, timeoutMs: this.config.timeoutMs }) };
        break;
      case 'fail':
        if (failuresSoFar < ms) {
          failuresSoFar += 1;
          logEvent(log, key, 'failed', ctx.attempt);
          throw new Error(`crunch failure ${failuresSoFar}`);
        }
        break;
    }
    logEvent(log, key, 'end', ctx.attempt);
    return { crunched: true, ...extra };
  }
}

@injectable()
class Publisher extends Agent {
  constructor(@inject(LIFECYCLE_CONFIG) private readonly config: LifecycleConfig) {
    super();
  }

  @Step()
  publish(ctx: StepContext) {
    logEvent(this.config.log, 'Publisher/publish', 'start', ctx.attempt);
    logEvent(this.config.log, 'Publisher/publish', 'end', ctx.attempt);
    return { published: true };
  }
}

/**
 * Three agents, one step each: a fast step, the configurable long step, a fast step. Small enough that
 * "exactly the right steps re-ran" is a short list.
 */
@Pipeline({ name: 'lifecycle-test', version: '1.0.0', agents: [Intake, Cruncher, Publisher] })
export class LifecyclePipeline {}

export const STEP_KEYS = readPlan(LifecyclePipeline).steps.map((s) => s.key);

/** The input of every run (a resume must pass the same input or none). */
export const INPUT = { topic: 'lifecycle' };

/** Binds the step configuration the agents are injected with. */
export function lifecycleModule(config: LifecycleConfig): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(LIFECYCLE_CONFIG).toConstantValue(config);
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function abortable(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    // the abort reason, unchanged: the runtime tells a pause (a PauseRequest, not an Error) from a timeout by it
    const fail = () => reject(signal.reason);
    if (signal.aborted) return fail();
    const timer = setTimeout(() => (signal.removeEventListener('abort', onAbort), resolve()), ms);
    const onAbort = () => (clearTimeout(timer), fail());
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
