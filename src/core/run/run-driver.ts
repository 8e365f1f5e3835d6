import type { CheckpointStore, LoadedRun, RunRecord, RunStatus } from '../../contract/checkpoint-store';
import { itemOf, restoreRun, type FlowRestoreOptions, type RestoredRun } from '../history/checkpoint-manager';
import type { ChildRunner, ItemChildRunner } from './execution';
import type { FanOutOutcome, FanOutRunner } from '../flow/fan-out';
import type { ChildStateReader } from '../flow/flow-executor';
import { rowPath, SYSTEM_AGENT } from '../history/row-integrity';
import type { Clock } from '../../contract/clock';
import { RunCancelledError, RunLockedError, RunNotFoundError, RunNotRetriedError, WaypointError } from '../../contract/errors';
import { describeError } from '../../contract/errors';
import { childLogger } from '../ports/logger';
import { type Logger } from '../../contract/logger';
import type { ResolvedOptions } from './options';
import type { PipelinePlan } from '../plan/plan-reader';
import { activeRuns } from '../lease/process-registry';
import { LeaseKeeper } from '../lease/run-lease';
import type { Telemetry } from '../../contract/telemetry';
import type { RetentionManager } from '../history/retention';
import { PauseRequest, type RunExecutor } from '../step/run-executor';
import { RunRestorer } from './run-restore';
import { signalKey } from '../step/durable-waits';
import { armDeadline, graceFor } from './run-deadline';
import { assertTransition, resumeHintFor } from './run-status';
import { loadRunProgress } from '../history/progress-reads';
import type { ResumableRun } from '../history/resume-base';
import { validateState } from '../state/state-schema';
import { strictSchema } from '../plan/strict-state';
import type { RunFleet, RunOptions, RunResult } from './run-options';
import { RunStreamWriter } from '../stream/run-stream-writer';

/** What a run driver works with, given once when it is made. */
export interface RunDriverParts {
  store: CheckpointStore;
  clock: Clock;
  logger: Logger;
  options: ResolvedOptions;
  executor: RunExecutor;
  retention: RetentionManager | undefined;
  telemetry: Telemetry;
  children?: DriverChildren;
}

/** How a parent's forEach runs and reads its child runs (the Waypoint's child-run service). */
export interface DriverChildren {
  run: ChildRunner;
  state: ChildStateReader;
  fanOut?: (child: Parameters<FanOutRunner>[0], spec: Parameters<FanOutRunner>[1], fleet: RunFleet) => Promise<FanOutOutcome>;
  itemChild?: ItemChildRunner;
}

/** The stop signal of one call, whether the lease loss that aborted it was already reported, and the call's stream writer. */
interface Stopping {
  stop: AbortController;
  stream: RunStreamWriter;
  leaseLossReported: boolean;
  detach(): void;
}

/** A run loaded and restored under the lease, ready to execute. */
interface Restored {
  loaded: LoadedRun;
  restored: RestoredRun;
  /** Recorded steps reused instead of run again. */
  skipped: number;
}

type ExecutionOutcome = Awaited<ReturnType<RunExecutor['execute']>>;

/**
 * Takes a stored run through one `run` / `resume` call: lease, restore (with migration or corruption
 * fallback), execute, and record how it ended (completed, paused, waiting, failed). The public
 * `Waypoint` facade resolves and validates; this is the engine behind it.
 */
export class RunDriver {
  private readonly store: CheckpointStore;
  private readonly clock: Clock;
  private readonly logger: Logger;
  private readonly options: ResolvedOptions;
  private readonly executor: RunExecutor;
  private readonly retention: RetentionManager | undefined;
  private readonly telemetry: Telemetry;
  /** How a parent's forEach runs and reads its child runs (absent: a forEach over a @Pipeline cannot run). */
  private readonly children: DriverChildren | undefined;

  constructor(parts: RunDriverParts) {
    ({ store: this.store, clock: this.clock, logger: this.logger, options: this.options, executor: this.executor, retention: this.retention } = parts);
    ({ telemetry: this.telemetry, children: this.children } = parts);
    this.restorer = new RunRestorer(this.store, this.clock, this.logger, this.options);
  }

  /** Checks, restores and migrates a run's rows. */
  private readonly restorer: RunRestorer;

  /**
   * One `run` / `resume` call: refuse what must not start, take the run (in this process, then the lease),
   * restore it, execute it, and record how it ended. `created`: this call created the run, so it has no
   * rows to check yet.
   */
  async advance<S>(plan: PipelinePlan, run: RunRecord, options: RunOptions, created = false, late = 0): Promise<RunResult<S>> {
    const { result, waitingFor } = await this.advanceOnce<S>(plan, run, options, created);
    // A signal delivered while this execution was suspending found the run still running, so nobody woke
    // it: take it on now instead of leaving the run waiting for a signal it has (at most twice in a row).
    if (result.status !== 'waiting' || waitingFor === undefined || late >= 2) return result;
    if ((await this.store.getOperation(signalKey(run.runId, waitingFor))) === null) return result;
    this.logger.info('signal arrived while the run suspended; continuing', { runId: run.runId, signal: waitingFor });
    return this.advance<S>(plan, (await this.store.getRun(run.runId)) ?? run, options, false, late + 1);
  }

  private async advanceOnce<S>(plan: PipelinePlan, run: RunRecord, options: RunOptions, created: boolean): Promise<{ result: RunResult<S>; waitingFor?: string }> {
    const runId = run.runId;
    if (run.status === 'cancelled') throw new RunCancelledError(runId);
    if (run.status === 'completed') return { result: await this.completedResult<S>(plan, (await this.store.loadRun(runId))!) };
    // Before the lease too, so that the usual case leaves the lease epoch where it was.
    if (run.status === 'failed' && options.retryFailed === false) throw new RunNotRetriedError(runId);
    // A corrupted run is refused before anything is written for it, the lease included: the checks leave
    // the store as they found it. (With onCorruption 'fallback' the caller asked for the rewrite.)
    const checked = !created && this.options.onCorruption !== 'fallback' ? await this.restorer.assertIntact(runId) : null;
    const log = childLogger(this.logger, { runId, pipeline: plan.name });
    const keeper = await this.takeRun(runId, options, log);
    const stopping = this.stopSignal(runId, options, keeper, log);
    try {
      const start = await this.restoreForExecution<S>(plan, runId, keeper, options.retryFailed ?? true, checked);
      if ('result' in start) return { result: start.result };
      const outcome = await this.execute(plan, start, options, keeper, stopping, log, created);
      return { result: await this.settle<S>(plan, runId, outcome, start.skipped, keeper, stopping), waitingFor: outcome.waitingFor };
    } finally {
      // Every part, retraction and status of this execution is stored (or known lost) before the lease goes.
      await stopping.stream.finish();
      stopping.detach();
      await keeper.release();
      activeRuns(this.store).delete(runId);
    }
  }

  /** The result of a run that had already completed: its state replayed from the rows, nothing executed. */
  private async completedResult<S>(plan: PipelinePlan, loaded: LoadedRun): Promise<RunResult<S>> {
    const restored = await restoreRun(plan, loaded, this.options.integrity, this.replayOptions());
    return this.result<S>(plan, loaded.run.runId, 'completed', restored.state, restored.lastSequence, 0, restored.completed.size, true);
  }

  /**
   * Claims the run in this process, then takes its lease. The store lets an owner re-take its own lease (a
   * restarted process with a stable worker id), so two calls in this process for one run must be stopped
   * here, before the second bumps the epoch; both waits share `waitForLockMs`. The caller removes the
   * claim (`activeRuns`) when it is done.
   */
  private async takeRun(runId: string, options: RunOptions, log: Logger): Promise<LeaseKeeper> {
    const active = activeRuns(this.store);
    const waitMs = options.waitForLockMs ?? this.options.waitForLockMs;
    const waitUntil = this.clock.now().getTime() + waitMs;
    while (active.has(runId)) {
      if (this.clock.now().getTime() >= waitUntil) throw new RunLockedError(runId, active.get(runId)!, null);
      await this.clock.sleep(Math.min(25, waitUntil - this.clock.now().getTime()));
    }
    active.set(runId, this.options.workerId);
    try {
      return await LeaseKeeper.acquire(this.store, this.clock, log, runId, this.options, Math.max(0, waitUntil - this.clock.now().getTime()));
    } catch (error) {
      active.delete(runId);
      throw error;
    }
  }

  /** What stops the execution: the caller's signal (a pause), a lost lease, the deadline. `detach` undoes the listeners and the timer. */
  private stopSignal(runId: string, options: RunOptions, keeper: LeaseKeeper, log: Logger): Stopping {
    const stop = new AbortController();
    const onUserStop = () => {
      const reason: unknown = options.signal?.reason;
      stop.abort(reason instanceof PauseRequest ? reason : new PauseRequest(reason === undefined ? 'stop requested' : describeReason(reason)));
    };
    options.signal?.addEventListener('abort', onUserStop, { once: true });
    if (options.signal?.aborted) onUserStop();
    const stopping: Stopping = {
      stop,
      // The run's live output (core/stream): an append refused for a lost lease stops the run as the heartbeat would.
      stream: new RunStreamWriter(this.store, runId, keeper.fence, log, this.options.liveOutput, (error) => stop.abort(error)),
      leaseLossReported: false,
      detach: () => {
        clearTimeout(deadlineTimer);
        options.signal?.removeEventListener('abort', onUserStop);
      },
    };
    keeper.onLost((error) => {
      stopping.leaseLossReported = true;
      this.telemetry.leaseLost({ runId, epoch: keeper.epoch });
      stop.abort(error);
    });
    const deadlineTimer = armDeadline(options, stop, this.clock);
    return stopping;
  }

  /**
   * Under the lease: loads the run and restores its state (migrating it or falling back as configured),
   * marks it running, and reports the start. A run that ended while this call waited for the lease ends
   * the call as a later call would: `result` for a completed one, `RunCancelledError` for a cancelled one,
   * `RunNotRetriedError` for a failed one when this call may not retry it.
   */
  private async restoreForExecution<S>(
    plan: PipelinePlan,
    runId: string,
    keeper: LeaseKeeper,
    retryFailed: boolean,
    checked: ResumableRun | null,
  ): Promise<{ result: RunResult<S> } | Restored> {
    const restoreStart = performance.now();
    // The run row, its resume snapshot and the rows after it (every row when there is no snapshot that fits), or what the check before the lease read.
    const { loaded, verified } = await this.restorer.loadUnderLease(runId, keeper.epoch, checked);
    if (!loaded) throw new RunNotFoundError(runId);
    if (loaded.run.status === 'cancelled') throw new RunCancelledError(runId);
    if (loaded.run.status === 'failed' && !retryFailed) throw new RunNotRetriedError(runId);
    if (loaded.run.status === 'completed') return { result: await this.completedResult<S>(plan, loaded) };
    const restored = await this.restorer.restore(plan, loaded, keeper.fence, verified);
    validateState(plan.state, restored.state, { runId, phase: 'loaded from the store' });
    if (restored.migration) await this.restorer.recordMigration(plan, runId, restored, keeper.fence);
    if (loaded.run.status !== 'running') {
      assertTransition(runId, loaded.run.status, 'running');
      await this.store.updateRun(runId, { status: 'running', error: null, resumeHint: null }, keeper.fence);
    }
    const skipped = restored.completed.size;
    if (skipped > 0) this.logger.info('resuming run', { runId, pipeline: plan.name, skipped, sequence: restored.lastSequence });
    const restoredSteps = loaded.steps
      .filter((row) => row.agentId !== SYSTEM_AGENT && restored.completed.has(rowPath(row)))
      .map((row) => ({ step: rowPath(row), sequence: row.sequence }));
    this.telemetry.runStarted({ runId, pipeline: plan.name, resumed: skipped > 0, skipped, restoreMs: performance.now() - restoreStart, restoredSteps });
    return { loaded, restored, skipped };
  }

  /**
   * Runs the remaining steps; a failure is recorded (or a lost lease reported) and rethrown. The stream is
   * opened first: what a dead execution left unretracted is retracted, and `running` appended.
   */
  private async execute(
    plan: PipelinePlan,
    start: Restored,
    options: RunOptions,
    keeper: LeaseKeeper,
    stopping: Stopping,
    log: Logger,
    created: boolean,
  ): Promise<ExecutionOutcome> {
    const { loaded, restored } = start;
    const runId = loaded.run.runId;
    const stream = stopping.stream;
    try {
      await stream.open(restored.completed, created);
      return await this.executor.execute({
        plan,
        runId,
        fence: keeper.fence,
        restored,
        stop: stopping.stop.signal,
        gracePeriodMs: graceFor(options),
        validateEveryStep: this.options.validateEveryStep,
        strict: strictSchema(plan, this.options.strictState),
        durability: plan.durability ?? this.options.durability,
        integrity: this.options.integrity,
        encrypted: this.options.encrypted,
        logger: log,
        stream,
        item: itemOf(loaded.run),
        runChild: this.children?.run,
        itemChild: this.children?.itemChild,
        fanOut: options.fleet && this.children?.fanOut ? fanOutWith(this.children.fanOut, options.fleet) : undefined,
        compaction: this.restorer.boundaryWork(plan, this.retention, () => keeper.fence, this.children?.state),
      });
    } catch (error) {
      return this.executionFailed(plan, runId, restored, keeper, stopping, error);
    }
  }

  /** Records why the execution ended with `error` and rethrows it (a cancel seen as a lost lease becomes `RunCancelledError`). */
  private async executionFailed(plan: PipelinePlan, runId: string, restored: RestoredRun, keeper: LeaseKeeper, stopping: Stopping, error: unknown): Promise<never> {
    const now = await this.store.getRun(runId).catch(() => null);
    const stepsExecuted = Math.max(0, (now?.lastSequence ?? restored.lastSequence) - restored.lastSequence);
    const lost = error instanceof WaypointError && error.code === 'LEASE_LOST';
    if (lost) {
      // A fenced write found the lease gone before the heartbeat did: report it the same way.
      if (!stopping.leaseLossReported) this.telemetry.leaseLost({ runId, epoch: keeper.epoch });
      if (now?.status === 'cancelled') {
        this.telemetry.runEnded({ runId, pipeline: plan.name, status: 'cancelled', stepsExecuted });
        throw new RunCancelledError(runId);
      }
      this.logger.error('lease lost; executor stopped', { runId, pipeline: plan.name, epoch: keeper.epoch });
    } else {
      if (await this.recordFailure(runId, plan.name, keeper.fence, error)) stopping.stream.status('failed');
      this.logger.error('run failed', { runId, pipeline: plan.name, error: describeError(error) });
    }
    this.telemetry.runEnded({ runId, pipeline: plan.name, status: lost ? 'lease_lost' : 'failed', stepsExecuted });
    throw error;
  }

  /** Records how the execution ended on the run row and its stream (paused, waiting, completed after every part), and returns the call's result. */
  private async settle<S>(
    plan: PipelinePlan,
    runId: string,
    outcome: ExecutionOutcome,
    skipped: number,
    keeper: LeaseKeeper,
    { stop: { signal: stop }, stream }: Stopping,
  ): Promise<RunResult<S>> {
    if (outcome.status === 'completed' && outcome.stepsExecuted === 0 && !outcome.closed) {
      // Nothing left to run (e.g. a migration marked every step done): the last append did not close the run.
      await this.store.updateRun(runId, { status: 'completed', resumeHint: resumeHintFor(runId, 'completed') }, keeper.fence);
    }
    if (outcome.status === 'paused') {
      const why = (stop.reason as PauseRequest).why;
      const detail = `(${why}) after sequence ${outcome.lastSequence}${outcome.detail ? `; ${outcome.detail}` : ''}`;
      await this.store.updateRun(runId, { status: 'paused', resumeHint: resumeHintFor(runId, 'paused', detail) }, keeper.fence);
      stream.status('paused', why);
      this.logger.warn('run paused', { runId, pipeline: plan.name, sequence: outcome.lastSequence, why });
    } else if (outcome.status === 'waiting') {
      await this.store.updateRun(runId, { status: 'waiting', resumeHint: resumeHintFor(runId, 'waiting', outcome.detail) }, keeper.fence);
      stream.status('waiting', outcome.waitingFor ?? outcome.detail);
      this.logger.info('run waiting', { runId, pipeline: plan.name, detail: outcome.detail });
    }
    if (outcome.status === 'completed') stream.status('completed');
    this.telemetry.runEnded({ runId, pipeline: plan.name, status: outcome.status, stepsExecuted: outcome.stepsExecuted });
    if (outcome.status === 'completed') this.logger.info('run completed', { runId, pipeline: plan.name, sequence: outcome.lastSequence, executed: outcome.stepsExecuted, skipped });
    return this.result<S>(plan, runId, outcome.status, outcome.state, outcome.lastSequence, outcome.stepsExecuted, skipped, skipped > 0);
  }

  private replayOptions(): FlowRestoreOptions {
    return { replay: true, childState: this.children?.state };
  }

  /** Marks the run failed with its error, unless the failure is a lost lease or an unreachable store; true when it did. */
  private async recordFailure(runId: string, pipelineName: string, fence: { epoch: number }, error: unknown): Promise<boolean> {
    if (error instanceof WaypointError && (error.code === 'LEASE_LOST' || error.code === 'STORE_UNAVAILABLE')) return false;
    try {
      await this.store.updateRun(
        runId,
        {
          status: 'failed',
          error: describeError(error),
          resumeHint: resumeHintFor(
            runId,
            'failed',
            `(${error instanceof WaypointError ? error.code : error instanceof Error ? error.name : 'error'}${error instanceof WaypointError && error.step ? ` in step '${error.step}'` : ''}; the error is stored with the run)`,
          ),
        },
        fence,
      );
      return true;
    } catch (recordError) {
      this.logger.error('could not record run failure', { runId, pipeline: pipelineName, error: describeError(recordError) });
      return false;
    }
  }

  private async result<S>(
    plan: PipelinePlan,
    runId: string,
    status: RunStatus,
    state: unknown,
    lastSequence: number,
    executed: number,
    skipped: number,
    resumed: boolean,
  ): Promise<RunResult<S>> {
    // A straight line's steps are its plan's, each recorded once: no read needed. A tree's are known only from its decisions.
    const run = plan.linear ? null : await this.store.getRun(runId);
    const progress = run ? await loadRunProgress(this.store, run, plan, this.options.integrity) : { recorded: executed + skipped, planned: plan.steps.length };
    return {
      runId,
      pipeline: plan.name,
      version: plan.version,
      status,
      state: { ...(state as object) } as S,
      resumed,
      stepsExecuted: executed,
      stepsSkipped: skipped,
      lastSequence,
      totalSteps: progress.planned ?? plan.steps.length,
      progress,
    };
  }
}

/** A readable pause reason from whatever a caller aborted its signal with. */
function describeReason(reason: unknown): string {
  if (typeof reason === 'string') return reason;
  if (reason instanceof Error) return reason.message;
  return typeof reason === 'object' && reason !== null && 'why' in reason ? String(reason.why) : String(reason);
}

function fanOutWith(fanOut: (child: Parameters<FanOutRunner>[0], spec: Parameters<FanOutRunner>[1], fleet: RunFleet) => Promise<FanOutOutcome>, fleet: RunFleet): FanOutRunner {
  return (child, spec) => fanOut(child, spec, fleet);
}
