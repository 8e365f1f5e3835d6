import type { Container } from 'inversify';
import { CRASH_HOOK, type CrashHook } from './crash-points';
import type { CheckpointStore } from '../../contract/checkpoint-store';
import type { Agent } from '../../contract/agent';
import type { Clock } from '../../contract/clock';
import { StepFailedError, StepTimeoutError, WaypointError } from '../../contract/errors';
import { stepIdempotencyKey } from './idempotency-guard';
import { describeError } from '../../contract/errors';
import { childLogger } from '../ports/logger';
import { type Logger } from '../../contract/logger';
import type { Telemetry } from '../../contract/telemetry';
import type { PipelinePlan, StepPlan } from '../plan/plan-reader';
import { backoffDelay } from './retry';
import { stepStorage, type ActiveStep } from './run-context';
import { sha256 } from '../state/serializer';
import { deserialize } from '../state/value-decoder';
import { durableSleep, waitForSignal, WaitSuspended } from './durable-waits';
import type { SharedState } from '../state/state-schema';
import type { StepContext } from './step-context';
import { LiveExecution } from '../flow/live-execution';
import { resolveAgent } from './agent-factory';
import { emitPart } from './step-emit';
import { checkOutput, classifyFailure, isRetryable, isThenable, onAbort } from './step-attempt';
import { PauseRequest, StepAbandoned, type AttemptResult, type LiveInput, type ExecutionOutcome, type StepRunner, type StepSite } from '../run/execution';

export { PauseRequest, StepAbandoned } from '../run/execution';
export type { ExecutionOutcome, ChildRunner, StepSite, AttemptResult } from '../run/execution';

/**
 * Runs a step's attempts (retries, timeout, the grace period of a pause) and makes agents; the tree
 * interpreter's live execution (core/flow/live-execution.ts) walks every pipeline, a straight line
 * included, and records each step through the step recorder. Nothing reflective and no schema work happens here.
 */
export class RunExecutor implements StepRunner {
  constructor(
    private readonly container: Container,
    private readonly store: CheckpointStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly telemetry: Telemetry,
  ) {
    // Bound only by the test kit (waypoint-durable/testing): its in-process crash points.
    this.crash = container.isBound(CRASH_HOOK) ? container.get<CrashHook>(CRASH_HOOK) : undefined;
  }

  private readonly crash: CrashHook | undefined;

  /** Runs the pipeline's tree from where the restored rows leave it (see live-execution.ts). */
  execute(input: LiveInput): Promise<ExecutionOutcome> {
    return new LiveExecution(this, this.store, this.clock, this.telemetry, this.crash === undefined ? input : { ...input, crash: this.crash }).run();
  }

  /** A fresh agent of `type` from the container, with `saved` memory restored when given. */
  createAgent(type: PipelinePlan['agents'][number]['type'], saved: string | undefined, runId: string): Agent {
    const agent = resolveAgent(this.container, type, runId);
    if (saved !== undefined) agent.restore(deserialize(saved));
    return agent;
  }

  /**
   * Runs `step` until an attempt succeeds or its retry policy gives up. A successful attempt settles the
   * promise `runOnce` made for it, with no async wrapper around it: the step's hot path makes one promise
   * of its own. A failed attempt goes through `afterFailure`, which starts the next one or rejects.
   */
  runAttempts(input: LiveInput, step: StepPlan, agent: Agent, state: SharedState, sequence: number, site?: StepSite): Promise<AttemptResult> {
    return this.attempt(input, step, agent, state, sequence, site, 1);
  }

  /** `emitted`: the stream event the step's row must wait for so far (an earlier attempt's retraction). */
  private attempt(
    input: LiveInput,
    step: StepPlan,
    agent: Agent,
    state: SharedState,
    sequence: number,
    site: StepSite | undefined,
    attempt: number,
    emitted = 0,
  ): Promise<AttemptResult> {
    const startedAt = this.clock.now();
    const active = this.activeStep(input, step, attempt, sequence, site, emitted);
    return this.runOnce(input, step, agent, state, active, site, startedAt, (error) => this.afterFailure(error, input, step, agent, state, sequence, site, active));
  }

  /**
   * After attempt `active.attempt` failed with `error`: rolls its transaction back, records the attempt,
   * and runs the next attempt after the policy's backoff; rejects when the step cannot run again (a
   * pause, a stop, an error that is not retryable, the last attempt).
   */
  private async afterFailure(
    error: unknown,
    input: LiveInput,
    step: StepPlan,
    agent: Agent,
    state: SharedState,
    sequence: number,
    site: StepSite | undefined,
    active: ActiveStep,
  ): Promise<AttemptResult> {
    const { runId, stop } = input;
    const policy = step.retry;
    const key = site?.path ?? step.key;
    const attempt = active.attempt;
    // The attempt will not be recorded: its parts are withdrawn before any part of the next attempt, and
    // the step's row (if a later attempt writes one) waits for the retraction too.
    const emitted = active.parts > 0 ? input.stream.retract(active.stepKey, attempt) || active.emitted : active.emitted;
    await active.transaction?.rollback(); // the attempt's effects and records go with it; it runs again
    if (error instanceof StepAbandoned || error instanceof WaitSuspended) throw error;
    if (stop.aborted && stop.reason instanceof PauseRequest) throw new StepAbandoned();
    if (stop.aborted) throw stop.reason;
    error = classifyFailure(error, runId, key);
    await this.recordAttempt(input, step, attempt, error, key);
    const retryable = isRetryable(error) && (policy.retryOn?.(error) ?? true);
    const willRetry = retryable && attempt < policy.maxAttempts;
    this.telemetry.stepFailed({ runId, pipeline: input.plan.name, step: key, sequence, backend: this.store.backend, attempt, error, willRetry });
    active.logger.warn('step attempt failed', { error: describeError(error), retrying: willRetry });
    if (!retryable) throw error instanceof WaypointError && error.code !== 'NON_RETRYABLE' ? error : new StepFailedError(runId, key, attempt, error);
    if (attempt >= policy.maxAttempts) throw new StepFailedError(runId, key, attempt, error);
    try {
      await this.clock.sleep(backoffDelay(policy, attempt), stop);
    } catch {
      if (stop.reason instanceof PauseRequest) throw new StepAbandoned();
      throw stop.reason;
    }
    return this.attempt(input, step, agent, state, sequence, site, attempt + 1, emitted);
  }

  /** Keeps a failed attempt (number and error) in the operations log, so a person can see what happened. */
  private async recordAttempt(input: LiveInput, step: StepPlan, attempt: number, error: unknown, key = step.key): Promise<void> {
    const operationKey = sha256(JSON.stringify(['attempt', input.runId, key, input.fence.epoch, attempt]));
    try {
      await this.store.beginOperation({ operationKey, runId: input.runId, stepKey: key, name: `attempt:${attempt}` }, input.fence);
      await this.store.finishOperation(operationKey, { state: 'failed', error: describeError(error) }, { ...input.fence, runId: input.runId });
    } catch (recordError) {
      if (recordError instanceof WaypointError && recordError.code === 'LEASE_LOST') throw recordError;
      input.logger.warn('could not record failed attempt', { agent: step.agentId, step: step.key, attempt, error: describeError(recordError) });
    }
  }

  private activeStep(input: LiveInput, step: StepPlan, attempt: number, sequence: number, site: StepSite | undefined, emitted: number): ActiveStep {
    const key = site?.path ?? step.key;
    const active: ActiveStep = {
      runId: input.runId,
      agentId: step.agentId,
      stepName: step.name,
      stepKey: key,
      path: key === step.key && step.key === `${step.agentId}/${step.name}` ? undefined : key,
      attempt,
      signal: input.stop,
      fence: input.fence,
      store: this.store,
      logger: childLogger(input.logger, { agent: step.agentId, step: key, sequence, attempt }),
      clock: this.clock,
      telemetry: this.telemetry,
      ordinals: new Map(),
      committed: [],
      stream: input.stream,
      rowsDurable: input.rowsDurable,
      emitted,
      parts: 0,
      ended: false,
      emit: (part) => emitPart(active, part),
      crash: input.crash,
    };
    return active;
  }

  /** What the step method gets as `ctx` for the attempt `active` (its signal already set). */
  private stepContext(input: LiveInput, step: StepPlan, state: SharedState, active: ActiveStep, site: StepSite | undefined): StepContext<Record<string, unknown>> {
    const { runId } = input;
    return {
      state,
      runId,
      agentId: step.agentId,
      stepName: step.name,
      stepIndex: step.stepIndex,
      path: site?.path ?? step.key,
      iteration: site?.iteration,
      item: site ? site.item : input.item?.value,
      itemIndex: site ? site.itemIndex : input.item?.index,
      attempt: active.attempt,
      signal: active.signal,
      logger: active.logger,
      // Computed when read: most steps never ask, and the step row computes its own copy once.
      get idempotencyKey() {
        return active.path ? stepIdempotencyKey(runId, step.agentId, active.path) : stepIdempotencyKey(runId, step.agentId, step.name);
      },
      sleep: (ms) => durableSleep(active, ms),
      waitFor: (name, options) => waitForSignal(active, name, options),
      emit: active.emit,
    };
  }

  /**
   * One attempt. The attempt's signal aborts on timeout and on any stop. A timeout or a lost lease fails
   * the attempt at once; a pause waits up to the grace period for the step to finish (so its result can
   * be checkpointed) and abandons it after that. The returned promise settles with the attempt's result,
   * or with what `onFailure` makes of the first failure (called at most once, whatever fails after it).
   */
  private runOnce(
    input: LiveInput,
    step: StepPlan,
    agent: Agent,
    state: SharedState,
    active: ActiveStep,
    site: StepSite | undefined,
    startedAt: Date,
    onFailure: (error: unknown) => Promise<AttemptResult>,
  ): Promise<AttemptResult> {
    const { runId, stop, gracePeriodMs } = input;
    // Only a timeout needs a signal of the attempt's own; without one the run's stop signal is the same thing.
    const controller = step.timeoutMs !== undefined ? new AbortController() : null;
    active.signal = controller?.signal ?? stop;
    const ctx = this.stepContext(input, step, state, active, site);
    return new Promise<AttemptResult>((resolve) => {
      let timers: NodeJS.Timeout[] | null = null;
      let release: (() => void) | undefined;
      let settled = false;
      const cleanup = () => {
        settled = true;
        active.ended = true;
        timers?.forEach(clearTimeout);
        release?.();
      };
      const fail = (error: unknown) => {
        if (settled) return;
        cleanup();
        resolve(onFailure(error));
      };
      const succeed = (value: unknown) => {
        if (settled) return;
        cleanup();
        let output: Record<string, unknown>;
        try {
          output = checkOutput(value, runId, active.stepKey);
        } catch (error) {
          resolve(onFailure(error));
          return;
        }
        resolve({ output, attempt: active.attempt, committed: active.committed, startedAt, transaction: active.transaction, emitted: active.emitted, parts: active.parts });
      };
      const onStop = () => {
        controller?.abort(stop.reason);
        if (stop.reason instanceof PauseRequest) (timers ??= []).push(setTimeout(() => fail(new StepAbandoned()), gracePeriodMs));
        else fail(stop.reason);
      };
      if (step.timeoutMs !== undefined) (timers ??= []).push(timeoutTimer(runId, active.stepKey, step.timeoutMs, controller!, fail));
      if (stop.aborted) return onStop();
      release = onAbort(stop, onStop);
      let value: unknown;
      try {
        // A method written without `async` that throws fails its attempt like one that rejects.
        value = stepStorage.run(active, () => (agent as unknown as Record<string, (c: unknown) => unknown>)[step.method](ctx));
      } catch (error) {
        fail(error);
        return;
      }
      // A method that returns at once (no promise) is recorded without a turn of the microtask queue.
      if (isThenable(value)) Promise.resolve(value).then(succeed, fail);
      else succeed(value);
    });
  }
}

/** The timer that fails an attempt after `timeoutMs`, aborting its signal with the `StepTimeoutError`. */
function timeoutTimer(runId: string, stepKey: string, timeoutMs: number, controller: AbortController, fail: (error: unknown) => void): NodeJS.Timeout {
  return setTimeout(() => {
    const error = new StepTimeoutError(runId, stepKey, timeoutMs);
    controller.abort(error);
    fail(error);
  }, timeoutMs);
}
