import 'reflect-metadata';
import { inject, injectable } from 'inversify';
import { Agent, Pipeline, SideEffect, Step, Waypoint, memoryStorage, type RunResult, type StepContext, type Telemetry, type WaypointOptions } from '../../src/index';
import type { Logger } from '../../src/contract/logger';
import { telemetryModule } from '../../src/integrations/compose-telemetry';
import { ContainerModule } from 'inversify';
import { TOKENS } from '../../src/contract/tokens';

/** What the observed pipeline's steps do besides returning: set per test. */
export interface Hooks {
  /** Awaited inside step `Researcher/pause` (a test aborts its run's signal here to pause after it). */
  onPause?: (signal: AbortSignal) => void | Promise<void>;
  /** Awaited inside `Writer/draft` on each attempt; throw to fail the attempt. */
  onDraft?: (attempt: number) => void | Promise<void>;
  /** Awaited inside the side effect; throw to fail it. */
  inEffect?: () => void | Promise<void>;
}

export const HOOKS = Symbol.for('test:observed-hooks');

@injectable()
export class Notifier {
  sent = 0;
  constructor(@inject(HOOKS) private readonly hooks: Hooks) {}

  @SideEffect({ name: 'notify' })
  async notify(text: string): Promise<{ id: string }> {
    await this.hooks.inEffect?.();
    this.sent += 1;
    return { id: `msg-${text.length}` };
  }
}

@injectable()
export class Researcher extends Agent<{ seen: number }> {
  override memory = { seen: 0 };
  constructor(@inject(HOOKS) private readonly hooks: Hooks) {
    super();
  }
  @Step() gather() {
    this.memory.seen += 1;
    return { facts: ['a', 'b'] };
  }
  @Step() async pause(ctx: StepContext) {
    await this.hooks.onPause?.(ctx.signal);
    return { paused: true };
  }
}

@injectable()
export class Writer extends Agent {
  constructor(
    @inject(HOOKS) private readonly hooks: Hooks,
    @inject(Notifier) private readonly notifier: Notifier,
  ) {
    super();
  }
  @Step({ retries: { maxAttempts: 3, initialDelayMs: 1, jitter: false } }) async draft(ctx: StepContext) {
    await this.hooks.onDraft?.(ctx.attempt);
    return { draft: 'text' };
  }
  @Step() async send() {
    return { receipt: await this.notifier.notify('report') };
  }
}

/** Four steps in two agents: gather, pause (a test may pause the run here), draft (may fail), send (a side effect). */
@Pipeline({ name: 'observed', version: '1.0.0', agents: [Researcher, Writer] })
export class ObservedPipeline {}

const SILENT: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

export const STEP_KEYS = ['Researcher/gather', 'Researcher/pause', 'Writer/draft', 'Writer/send'];

/**
 * Runs the observed pipeline twice on one memory store: paused after its 2nd step, then resumed to the
 * end, with the 3rd step failing its first attempt when `failDraftOnce`. Returns both results.
 *
 * @example
 * const { first, second } = await pauseAndResume({ telemetry });
 */
export async function pauseAndResume(options: {
  telemetry?: Telemetry;
  logger?: Logger;
  failDraftOnce?: boolean;
  hooks?: Hooks;
}): Promise<{ first: RunResult; second: RunResult; waypoint: Waypoint }> {
  const stop = new AbortController();
  const hooks: Hooks = {
    onPause: () => stop.abort('test pause'),
    onDraft: (attempt) => {
      if (options.failDraftOnce && attempt === 1) throw new Error('draft service busy');
    },
    ...options.hooks,
  };
  const waypoint = await observedWaypoint(hooks, { telemetry: options.telemetry, logger: options.logger });
  const first = await waypoint.run(ObservedPipeline, { runId: 'observed-1', input: { topic: 'x' }, signal: stop.signal });
  const second = await waypoint.run(ObservedPipeline, { runId: 'observed-1' });
  return { first, second, waypoint };
}

/**
 * A Waypoint with the observed pipeline's services bound: on a memory store unless `storage` is given,
 * with a silent logger unless `logger` is, and any runtime options.
 */
export async function observedWaypoint(hooks: Hooks, options: { telemetry?: Telemetry; logger?: Logger; storage?: ContainerModule } & WaypointOptions): Promise<Waypoint> {
  const { telemetry, logger, storage, ...runtime } = options;
  const modules = [
    storage ?? memoryStorage(),
    new ContainerModule(({ bind }) => {
      bind(HOOKS).toConstantValue(hooks);
      bind(Notifier).toSelf().inSingletonScope();
      bind(TOKENS.Logger).toConstantValue(logger ?? SILENT);
    }),
  ];
  if (telemetry) modules.push(telemetryModule(telemetry));
  return Waypoint.create({ modules, ...runtime });
}
