import { setMaxListeners } from 'node:events';
import { ConstructsHere } from './constructs-here';
import type { CheckpointStore, StepRecord } from '../../contract/checkpoint-store';
import type { Agent } from '../../contract/agent';
import type { Clock } from '../../contract/clock';
import type { Telemetry } from '../../contract/telemetry';
import { describeError } from '../../contract/errors';
import { AgentInstances } from './agent-instances';
import { AppendQueue, type RowCursor } from './append-queue';
import { BoundaryYield } from './boundary-yield';
import { FlowInterpreter, type Between } from './flow-executor';
import { LoopLimitError } from './flow-errors';
import { ChildWaiting, Halt, Halted, WHEN, type Scope } from './flow-scope';
import { childRun, fleetItems, itemChildRun } from './live-children';
import { RowsBehind } from './rows-behind';
import { stepInstance, stepPath, UNRECORDED } from './flow-steps';
import { JOIN, MERGE } from './join-rows';
import { rootEntries } from '../history/flow-base';
import type { ForEachNode, LoopNode } from '../plan/flow-plan';
import type { AgentPlan, StepPlan } from '../plan/plan-reader';
import { PauseRequest, StepAbandoned, type AttemptResult, type ExecutionOutcome, type FlowStart, type LiveInput, type StepRunner, type StepSite } from '../run/execution';
import { resumeHintFor } from '../run/run-status';
import { serialize } from '../state/serializer';
import { StateFrame } from '../state/state-frame';
import { validateUpdate } from '../state/state-schema';
import { WaitSuspended } from '../step/durable-waits';
import { stepBoundary } from '../step/crash-points';
import { StepRecorder, type PreparedStep } from '../step/step-recorder';
import { partsBeforeRow } from '../step/step-emit';
import { NoopTelemetry } from '../ports/telemetry';

/**
 * A live execution: the interpreter (flow-executor.ts) with what only a run under its lease has: the step
 * runner, the store, the clock, telemetry, the step recorder and the append queue (one sequence, one chain),
 * the stop signal, retention, and the runners of child runs. What the recorded rows do not hold it runs and
 * records the moment it ends; appends are serialized while branches and items run concurrently, and at most
 * `concurrency` items are unrecorded at once because an item's slot frees only after its last record commits.
 */
export class LiveExecution extends FlowInterpreter {
  /** The execution's agents, one per agent instance. */
  private readonly agents: AgentInstances;
  private executed = 0;
  private readonly recorder: StepRecorder;
  /** Where the run's rows go, in order. */
  private readonly queue: AppendQueue;
  /** The step whose row ends the run (the last step of a top-level agent that ends the pipeline): its append closes the run. */
  private readonly closingStep: StepPlan | undefined;
  /** True once a row closed the run (its append set the run `completed`). */
  private closedByRow = false;
  /** Lets the event loop turn between steps (see boundary-yield.ts). */
  private readonly yielder = new BoundaryYield();
  /** The sequence when retention last ran (the restored one at the start). */
  private compactedAt: number;
  /** False with the default telemetry, which opens no spans. */
  private readonly tracing: boolean;
  /** 'async' durability: the step rows still being written while later steps run; null in 'sync' mode. */
  private readonly behind: RowsBehind | null;
  /** What steps and child runs are given: the input, with `rowsDurable` in 'async' mode. */
  private readonly stepInput: LiveInput;
  /** Builds an executed step's row: one function per execution, no closure per step. */
  private readonly stepRow = (sequence: number, prev: string, prepared: PreparedStep): StepRecord => this.recorder.record(prepared, sequence, prev);

  constructor(
    private readonly runner: StepRunner,
    private readonly store: CheckpointStore,
    private readonly clock: Clock,
    private readonly telemetry: Telemetry,
    protected override readonly input: LiveInput,
  ) {
    super(input);
    // Every step in flight listens to the run's stop signal: branches and items put many on it at once.
    setMaxListeners(0, input.stop);
    const behind = input.durability === 'async' ? new RowsBehind() : null;
    this.behind = behind;
    this.stepInput = behind ? { ...input, rowsDurable: () => behind.durable() } : input;
    this.queue = new AppendQueue(store, input.fence, input.restored.lastSequence, input.restored.chain.prev, behind !== null);
    this.recorder = new StepRecorder(store, clock, telemetry, input);
    this.agents = new AgentInstances(runner, input.runId, this.memories);
    this.compactedAt = input.restored.lastSequence;
    this.tracing = !(telemetry instanceof NoopTelemetry);
    const last = rootEntries(input.plan).at(-1);
    this.closingStep = last?.kind === 'agent' ? last.agent.steps[last.agent.steps.length - 1] : undefined;
  }

  /** Runs the tree to its end (or a pause, a wait, a failure) and closes the run when it completes. */
  async run(): Promise<ExecutionOutcome> {
    const { stop } = this.input;
    const frame = new StateFrame(this.input.restored.state, this.input.plan.reducers, false);
    try {
      await this.walk(frame);
      // 'async': the run ends (and is reported completed) only once its last row is durable.
      if (this.behind) await this.behind.durable();
    } catch (thrown) {
      // 'async': nothing ends (a pause, a wait, a failure) before the rows in flight settle; a failed one is why the run stops.
      const error = this.behind ? await this.behind.settle(thrown) : thrown;
      const outcome = (status: ExecutionOutcome['status'], detail?: string): ExecutionOutcome => ({
        status,
        detail,
        state: frame.view,
        stepsExecuted: this.executed,
        stepsReused: this.reused,
        lastSequence: this.queue.sequence,
      });
      if (error instanceof StepAbandoned || error instanceof Halted) {
        if (stop.aborted && !(stop.reason instanceof PauseRequest)) throw stop.reason;
        return outcome('paused', error instanceof StepAbandoned ? error.message || undefined : undefined);
      }
      if (error instanceof WaitSuspended)
        return { ...outcome('waiting', `${error.step ? `in step '${error.step}' ` : ''}for signal '${error.signalName}'`), waitingFor: error.signalName };
      if (error instanceof ChildWaiting) return outcome('waiting', error.message);
      throw error;
    }
    // The run is closed by the row of its last step when the pipeline ends with one; else (it ends with a
    // construct, or its last row was recorded earlier) by a write of its own.
    if (!this.closedByRow) {
      await this.store.updateRun(this.input.runId, { status: 'completed', resumeHint: resumeHintFor(this.input.runId, 'completed') }, this.input.fence);
    }
    return { status: 'completed', state: frame.view, stepsExecuted: this.executed, stepsReused: this.reused, lastSequence: this.queue.sequence, closed: true };
  }

  /**
   * An agent's steps, live: a recorded step is taken; one with no row runs (retries, timeout, side effects
   * inside), is recorded the moment it ends, and is merged. One async function walks all the agent's steps, as
   * the old straight-line loop walked the run: a step makes no promise of its own, and its write is the store's
   * promise awaited as it is when nothing else is in flight.
   */
  protected override async agentSteps(agentPlan: AgentPlan, scope: Scope, frame: StateFrame, between?: Between, folded?: number): Promise<void> {
    const steps = agentPlan.steps;
    for (let i = this.foldedSteps(agentPlan, scope, folded); i < steps.length; i++) {
      if (i > 0 && between && this.boundaryDue()) await between(i);
      const step = steps[i];
      const path = stepPath(step, scope);
      const instance = stepInstance(step, scope);
      const taken = this.takeStep(agentPlan, step, path, instance, frame);
      if (taken !== UNRECORDED) {
        if (taken) await taken;
        continue;
      }
      this.checkGo(scope);
      if (this.executed > 0 && this.yielder.due()) await this.turn();
      if (step.when && !(await this.when(agentPlan, step, path, scope, frame))) continue;
      const agent = this.agents.get(agentPlan, instance, path);
      let attempt: AttemptResult;
      try {
        attempt = await this.attempts(step, agent, path, scope, frame);
      } catch (error) {
        throw StepAbandoned.at(error, path);
      }
      let update: Record<string, unknown>;
      let appending = false;
      const after = this.cursorAfter(step, scope); // the run's cursor after the step (its row's, its merge row's)
      if (this.behind?.full) await this.behind.room();
      try {
        const prepared = this.recorder.prepare(step, path, attempt, agent, this.memories.get(instance));
        stepBoundary('after-record-before-checkpoint', this.input.crash, 'before-step-row', this.input.runId, path);
        // The step's parts are stored before its row (after it in SQLite's exclusive step transaction); a step that emitted nothing waits for nothing.
        if (attempt.emitted !== 0) await partsBeforeRow(this.input.stream, attempt);
        appending = true;
        const aside = attempt.transaction ? null : this.writeAside(prepared, after, instance, frame, agentPlan.index);
        if (aside !== null) {
          if (aside) await aside;
          continue;
        }
        const writeStart = performance.now();
        const queue = this.queue;
        const alone = queue.idle; // nothing in flight (a straight line, always): the store's promise as it is
        const writing = alone ? queue.startAlone(this.stepRow, prepared, after, attempt.transaction) : queue.append(this.stepRow, prepared, after, attempt.transaction);
        let record: StepRecord;
        try {
          const appended = await writing;
          record = alone ? queue.settleAlone(true)! : appended!;
        } catch (error) {
          if (alone) queue.settleAlone(false);
          throw error;
        }
        if (attempt.transaction && attempt.emitted !== 0) await this.input.stream.durable(attempt.emitted);
        this.landed(prepared, record, writeStart, instance);
        frame.apply((update = prepared.update));
      } catch (error) {
        // Refused before its append: its parts are withdrawn (after a failed append the next execution decides).
        if (!appending && attempt.parts > 0) this.input.stream.retract(path, attempt.attempt);
        await attempt.transaction?.rollback();
        throw error;
      }
      const merging = this.merged(path, update, frame, agentPlan.index, after);
      if (merging) await merging;
    }
  }

  /** Turns the event loop (once a millisecond), so a due SIGTERM, deadline or lease heartbeat runs between quick steps. */
  private async turn(): Promise<void> {
    await this.yielder.turn();
    this.checkStop();
  }

  /** A step's row written off the straight line's path: in 'async' mode, or with a merge row ('sync'); else null. */
  private writeAside(prepared: PreparedStep, after: RowCursor, instance: string, frame: StateFrame, agentIndex: number): Promise<void> | void | null {
    if (this.behind) return this.merged(prepared.path, this.appendBehind(prepared, after, instance, frame), frame, agentIndex, after);
    return this.mergesAfter(prepared.update, frame) ? this.withMergeRow(prepared, after, instance, frame, agentIndex) : null;
  }

  /**
   * 'async' durability: the row goes to the queue and the next step starts while it is written. The update and
   * memory apply now, the report when the row lands; a failed write stops the run at the next step, barrier or end.
   */
  private appendBehind(prepared: PreparedStep, cursor: RowCursor, instance: string, frame: StateFrame): Record<string, unknown> {
    const writeStart = performance.now();
    this.behind!.add(this.queue.append(this.stepRow, prepared, cursor), (record) => {
      // The SIGKILL fault point only: the test kit's crash points are the synchronous path's (a throw here would land in the write's callback).
      stepBoundary('after-checkpoint-before-next-step', undefined, 'after-step-row', this.input.runId, prepared.path);
      this.recorder.completed(prepared, record, performance.now() - writeStart);
      this.here.add(prepared.path);
    });
    if (prepared.memory !== null) this.memories.set(instance, prepared.memory);
    frame.apply(prepared.update);
    this.executed += 1;
    return prepared.update;
  }

  /** A step's attempts (retries, timeout, side effects inside), in a span only when a tracer is bound (not by default). */
  private attempts(step: StepPlan, agent: Agent, path: string, scope: Scope, frame: StateFrame): Promise<AttemptResult> {
    // At the top level the step's key, the run's item and no iteration are what the attempt assumes without a site.
    const site: StepSite | undefined = scope.path === '' ? undefined : { path, iteration: scope.iteration, item: scope.item, itemIndex: scope.itemIndex };
    const sequence = this.queue.sequence + 1 + (this.behind?.size ?? 0);
    if (!this.tracing) return this.runner.runAttempts(this.stepInput, step, agent, frame.view, sequence, site);
    return this.telemetry.span('waypoint.step', { 'waypoint.run_id': this.input.runId, 'waypoint.step': path, 'waypoint.restored': false }, () =>
      this.runner.runAttempts(this.stepInput, step, agent, frame.view, sequence, site),
    );
  }

  /** A step's row is committed: report it, keep its row and its agent's memory (its update is applied by the caller). */
  private landed(prepared: PreparedStep, record: StepRecord, writeStart: number, instance: string): void {
    stepBoundary('after-checkpoint-before-next-step', this.input.crash, 'after-step-row', this.input.runId, prepared.path);
    this.recorder.completed(prepared, record, performance.now() - writeStart);
    if (prepared.memory !== null) this.memories.set(instance, prepared.memory);
    this.here.add(prepared.path);
    this.executed += 1;
  }

  /**
   * 'sync' durability, a step whose update reaches a `@Reducer`: its row and its merge row leave in one write,
   * so the update applies (the reducers run) before it. A reducer that throws fails the step after its row landed.
   */
  private async withMergeRow(prepared: PreparedStep, after: RowCursor, instance: string, frame: StateFrame, agentIndex: number): Promise<void> {
    const writeStart = performance.now();
    const record = await this.queue.appendWith(this.stepRow, prepared, after, () => {
      frame.apply(prepared.update);
      return this.merged(prepared.path, prepared.update, frame, agentIndex, after);
    });
    this.landed(prepared, record, writeStart, instance);
  }

  /** A step's `when` condition: true when the step runs (the yes recorded); false when it was skipped (its skip row recorded). */
  private async when(agentPlan: AgentPlan, step: StepPlan, path: string, scope: Scope, frame: StateFrame): Promise<boolean> {
    if (this.decisionAt(`${path}${WHEN}`) !== undefined) return true;
    const go = this.select(
      () => step.when!(frame.view),
      path,
      'when condition',
      (v) => typeof v === 'boolean',
    );
    if (!go) {
      await this.recordSkip(step, path, scope);
      return false;
    }
    await this.recordDecision(`${path}${WHEN}`, true, agentPlan.index);
    return true;
  }

  /**
   * The run row's update that travels with a step's row: the cursor at the next plan step, and, for the
   * step that ends the pipeline at its top level, the run's completion (no write of its own).
   */
  private cursorAfter(step: StepPlan, scope: Scope): RowCursor {
    const plan = this.input.plan;
    const next = plan.steps[step.position + 1];
    // With reducers a merge row may follow the step's row, so the run is closed by a write of its own.
    if (scope.path === '' && step === this.closingStep && !this.reducing) {
      this.closedByRow = true;
      return { cursorAgent: plan.agents.length, cursorStep: 0, status: 'completed', resumeHint: resumeHintFor(this.input.runId, 'completed') };
    }
    return next
      ? { cursorAgent: next.agentIndex, cursorStep: next.stepIndex, status: 'running', resumeHint: null }
      : { cursorAgent: plan.agents.length, cursorStep: 0, status: 'running', resumeHint: null };
  }

  /** Before starting anything new: stop on a pause or a sibling's failure. */
  private checkGo(scope: Scope): void {
    this.behind?.check();
    this.checkStop();
    if (scope.halt.halted) throw new Halted();
  }

  /** A pause or a stop (cancel, lost lease) ends the run here, before anything new starts. */
  private checkStop(): void {
    const { stop } = this.input;
    if (stop.aborted) {
      if (stop.reason instanceof PauseRequest) throw new StepAbandoned();
      throw stop.reason;
    }
  }

  protected override async decide<T>(path: string, scope: Scope, ask: () => T): Promise<T> {
    this.checkGo(scope);
    const value = ask();
    await this.recordDecision(path, value, -1);
    return value;
  }

  private async recordDecision(path: string, value: unknown, agentIndex: number): Promise<void> {
    await this.recordSystem('decision', path, serialize({ value }, { runId: this.input.runId, step: path, what: 'decision' }), agentIndex);
  }

  protected override async unrecordedRow(kind: 'merge' | 'join', at: string, values: Record<string, unknown>, what: string, agentIndex: number, cursor?: RowCursor): Promise<void> {
    await this.recordSystem(kind, `${at}${kind === 'merge' ? MERGE : JOIN}`, serialize(values, { runId: this.input.runId, step: at, what }), agentIndex, cursor);
  }

  /** Appends a system row at `path` (a decision, a construct's join, a step's merge). */
  private async recordSystem(kind: 'decision' | 'join' | 'merge', path: string, output: string, agentIndex: number, after?: RowCursor): Promise<void> {
    const cursor: RowCursor = after ?? { cursorAgent: Math.max(0, agentIndex), cursorStep: 0, status: 'running', resumeHint: null };
    await this.queue.append((sequence, prev) => this.recorder.systemRow(kind, path, output, sequence, prev), undefined, cursor);
    this.here.add(path);
  }

  private async recordSkip(step: StepPlan, path: string, scope: Scope): Promise<void> {
    const now = this.clock.now();
    await this.queue.append((sequence, prev) => this.recorder.skipRow(step, path, now, sequence, prev), undefined, this.cursorAfter(step, scope));
    this.here.add(path);
  }

  /** Retention folds once the sequence passed a multiple of `every` since it last ran (or since the run started here); a resume snapshot is never taken where the run ends (`last`). */
  protected override boundaryDue(last = false): boolean {
    const compaction = this.input.compaction;
    if (last && compaction?.forResume) return false;
    return compaction !== undefined && Math.floor(this.queue.sequence / compaction.every) > Math.floor(this.compactedAt / compaction.every);
  }

  protected override async boundary(_frame: StateFrame, _at: FlowStart): Promise<void> {
    const compaction = this.input.compaction;
    if (!compaction || !this.boundaryDue()) return;
    if (this.behind) await this.behind.durable(); // retention folds only rows that landed
    this.compactedAt = this.queue.sequence;
    try {
      await compaction.compact(this.input.runId);
    } catch (error) {
      // Retention must never fail a run: a failed compaction leaves more rows behind, nothing else.
      this.input.logger.warn('compaction failed; rows are kept', { sequence: this.queue.sequence, error: describeError(error) });
    }
  }

  /** A live run joins the construct and records the join (`joined`). */
  protected override joinable(_at: string): void {}

  protected override loopLimit(at: string, node: LoopNode): never {
    throw new LoopLimitError(this.input.runId, at, node.maxIterations);
  }

  protected override collected(update: Record<string, unknown>, at: string): void {
    if (this.input.validateEveryStep) validateUpdate(this.input.plan.state, update, { runId: this.input.runId, step: at, phase: 'collected by forEach' });
  }

  /**
   * A forEach over a `@Pipeline` class (or a distributed agent or sequence body) in a run a fleet worker
   * executes: the child runs are queued for the fleet (see fan-out.ts); the parent waits until they have
   * ended, then reads their states (an item body's merged outputs) in item order. A distributed forEach
   * some of whose items already ran in a process without a fleet (rows under this run) stays in process: a
   * child run for such an item would run its steps again.
   */
  protected override fanOutItems(node: ForEachNode, scope: Scope, frame: StateFrame, at: string, list: unknown[]): Promise<void> | undefined {
    if (!this.input.fanOut || (node.distributed && this.itemsRanHere(at))) return undefined;
    return this.fanOut(node, scope, frame, at, list);
  }

  private async fanOut(node: ForEachNode, scope: Scope, frame: StateFrame, at: string, list: unknown[]): Promise<void> {
    this.checkGo(scope);
    frame.apply(await fleetItems(this.stepInput, node, scope, frame, at, list));
    await this.joined(at, [node.into], frame);
  }

  /** True when an item of the forEach at `at` recorded rows in this run (it ran in process, not as a child run). */
  private itemsRanHere(at: string): boolean {
    return this.here.has(at) || [...this.recorded.keys()].some((path) => path.startsWith(`${at}[`));
  }
  private readonly here = new ConstructsHere();

  /**
   * Run without a fleet after the items went to one: an item whose hidden child run exists is that run,
   * never run twice. An item still leased by a fleet worker fails it with RUN_LOCKED (the parent is resumed
   * again later): a parent left waiting would be woken onto the fleet, which does not know the items run here.
   */
  protected override itemElsewhere(node: ForEachNode, scope: Scope, index: number, halt: Halt): Promise<Record<string, unknown> | null> | null {
    if (!this.input.itemChild) return null;
    return itemChildRun(this.stepInput, node, `${this.input.runId}/${scope.path}${node.into}/${index}`, halt);
  }

  protected override child(node: ForEachNode, scope: Scope, at: string, item: unknown, index: number, halt: Halt): Promise<unknown> {
    return childRun(this.stepInput, node, scope, at, item, index, halt);
  }
}
