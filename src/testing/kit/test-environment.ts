import type { ContainerModule } from 'inversify';
import type { RunStatus } from '../../contract/checkpoint-store';
import { WaypointError } from '../../contract/errors';
import type { Class } from '../../decorators/class-type';
import { rowPath, SYSTEM_AGENT } from '../../core/history/row-integrity';
import { deserialize } from '../../core/state/value-decoder';
import type { RunResult, Waypoint } from '../../composition/waypoint';
import { KitProcesses } from './kit-process';
import { assertDecoratorMetadata } from './metadata-check';
import { ProcessLife } from './mortal-store';
import { TestClock } from './test-clock';

/** Options of {@link testEnvironment}. */
export interface TestEnvironmentOptions {
  /** True: every sleep (a `ctx.sleep`, a retry's backoff, a lease wait) moves the clock at once. Default false: time moves on `advance` and `runUntil`. */
  skipSleeps?: boolean;
  /** Pipelines the environment may resume by name; `start` registers its pipeline too. */
  pipelines?: Class[];
  /** Your container modules (services; a storage module to test on another store than memory). */
  modules?: ContainerModule[];
  /** The clock's start (default 2026-01-01T00:00:00Z). */
  start?: Date;
}

/** A recorded step of a run, for assertions. */
export interface RecordedStep {
  /** `agent/step`, or its path in a control-flow tree. */
  step: string;
  sequence: number;
  attempt: number;
  /** The step's output (its state update), decoded. */
  output: unknown;
}

/** A recorded side effect (operation) of a run, for assertions. */
export interface RecordedEffect {
  name: string;
  step: string;
  state: string;
  attempts: number;
  result: unknown;
}

/** A Waypoint on the memory store with a clock the test drives. See {@link testEnvironment}. */
export interface TestEnvironment {
  readonly waypoint: Waypoint;
  readonly clock: TestClock;
  /** Starts (or resumes) run `runId` without waiting for it; `runUntil` drives it. */
  start(pipeline: Class, options: { runId: string; input?: unknown }): void;
  /** Moves the clock forward, waking the sleeps that fall due. */
  advance(ms: number): Promise<void>;
  /** Delivers signal `name` to a run (`waypoint.signal`); the next `runUntil` resumes a run that waits for it. */
  signal(runId: string, name: string, payload?: unknown): Promise<boolean>;
  /** Drives the run (resuming it, advancing the clock to each next sleep) until its status is `status`. */
  runUntil(runId: string, status: RunStatus): Promise<RunResult>;
  steps(runId: string): Promise<RecordedStep[]>;
  effects(runId: string): Promise<RecordedEffect[]>;
  close(): Promise<void>;
}

/**
 * A Waypoint on the memory store (or your modules') whose clock the test drives: a pipeline with a
 * day-long `ctx.sleep` or a lease timeout runs in milliseconds.
 *
 * @example
 * const env = await testEnvironment();
 * env.start(Approval, { runId: 'a-1', input: { amount: 900 } });
 * await env.runUntil('a-1', 'waiting');
 * await env.signal('a-1', 'manager', { ok: true });
 * const result = await env.runUntil('a-1', 'completed');
 */
export async function testEnvironment(options: TestEnvironmentOptions = {}): Promise<TestEnvironment> {
  for (const pipeline of options.pipelines ?? []) assertDecoratorMetadata(pipeline, 'testEnvironment');
  const clock = new TestClock({ skipSleeps: options.skipSleeps ?? false, start: options.start });
  const waypoint = await new KitProcesses(options.modules ?? [], clock).open(new ProcessLife(), undefined);
  for (const pipeline of options.pipelines ?? []) waypoint.register(pipeline);
  return new Environment(waypoint, clock);
}

class Environment implements TestEnvironment {
  /** The execution in flight per run, settled to its result or error. */
  private readonly inFlight = new Map<string, Promise<{ result?: RunResult; error?: unknown }>>();

  constructor(
    readonly waypoint: Waypoint,
    readonly clock: TestClock,
  ) {}

  start(pipeline: Class, options: { runId: string; input?: unknown }): void {
    assertDecoratorMetadata(pipeline, 'testEnvironment');
    this.track(options.runId, this.waypoint.run(pipeline, { runId: options.runId, input: (options.input ?? {}) as Record<string, unknown> }));
  }

  advance(ms: number): Promise<void> {
    return this.clock.advance(ms);
  }

  signal(runId: string, name: string, payload?: unknown): Promise<boolean> {
    return this.waypoint.signal(runId, name, payload);
  }

  async runUntil(runId: string, status: RunStatus): Promise<RunResult> {
    let resumedWithoutProgress = false;
    for (;;) {
      const flight = this.inFlight.get(runId);
      if (flight) {
        const ended = await this.settleOrAdvance(flight);
        if (!ended) continue;
        this.inFlight.delete(runId);
        // eslint-disable-next-line @typescript-eslint/only-throw-error -- the run's own rejection, rethrown unchanged
        if (ended.error !== undefined) throw ended.error;
        if (ended.result!.status === status) return ended.result!;
        if (ended.result!.status === 'completed' || resumedWithoutProgress) throw stuck(runId, status, ended.result!.status);
        resumedWithoutProgress = ended.result!.stepsExecuted === 0;
      }
      const info = await this.waypoint.get(runId);
      if (!info) throw new WaypointError('RUN_NOT_FOUND', `testEnvironment: run '${runId}' does not exist: start it with env.start(Pipeline, { runId, input }) first.`, { runId });
      if (info.status === 'completed' && status !== 'completed') throw stuck(runId, status, info.status);
      if (info.status === 'failed' || info.status === 'cancelled') throw stuck(runId, status, info.status);
      this.track(runId, this.waypoint.resume(runId));
    }
  }

  async steps(runId: string): Promise<RecordedStep[]> {
    const loaded = await this.waypoint.store.loadRun(runId);
    return (loaded?.steps ?? [])
      .filter((row) => row.agentId !== SYSTEM_AGENT)
      .map((row) => ({ step: rowPath(row), sequence: row.sequence, attempt: row.attempt, output: deserialize(row.output) }));
  }

  async effects(runId: string): Promise<RecordedEffect[]> {
    const operations = await this.waypoint.store.listOperations(runId);
    return operations
      .filter((op) => !op.name.startsWith('attempt:'))
      .map((op) => ({ name: op.name, step: op.stepKey, state: op.state, attempts: op.attempts, result: op.result === null ? undefined : deserialize(op.result) }));
  }

  async close(): Promise<void> {
    await Promise.all(this.inFlight.values());
    await this.waypoint.close();
  }

  private track(runId: string, running: Promise<RunResult>): void {
    this.inFlight.set(
      runId,
      running.then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      ),
    );
  }

  /**
   * The execution's end, or undefined after moving the clock to the next sleep when the execution waits
   * for one: it is idle once a few turns of the event loop pass with it unsettled and a sleep pending.
   */
  private async settleOrAdvance(flight: Promise<{ result?: RunResult; error?: unknown }>): Promise<{ result?: RunResult; error?: unknown } | undefined> {
    const marker = Symbol('pending');
    for (let turn = 0; turn < 20; turn++) {
      const ended = await Promise.race([flight, new Promise<typeof marker>((resolve) => setImmediate(() => resolve(marker)))]);
      if (ended !== marker) return ended;
    }
    const due = this.clock.nextDue();
    if (due !== undefined) await this.clock.advance(Math.max(0, due - this.clock.now().getTime()));
    else await new Promise((resolve) => setTimeout(resolve, 1)); // real I/O (a database) in flight: let it answer
    return undefined;
  }
}

function stuck(runId: string, wanted: RunStatus, ended: RunStatus): WaypointError {
  return new WaypointError(
    'KIT_RUN_STUCK',
    `testEnvironment.runUntil: run '${runId}' ended ${ended} and cannot become ${wanted} from there. ` +
      `If it waits for a signal, send it with env.signal('${runId}', name, payload) first; otherwise ask for the status it reaches.`,
    { runId },
  );
}
