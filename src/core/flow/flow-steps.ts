import { setMaxListeners } from 'node:events';
import type { CheckpointStore, StepRecord } from '../../contract/checkpoint-store';
import type { Agent } from '../../contract/agent';
import { AppendQueue, type RowCursor } from './append-queue';
import { BoundaryYield } from './boundary-yield';
import { rootEntries } from '../history/flow-base';
import { resumeHintFor } from '../run/run-status';
import type { Clock } from '../../contract/clock';
import { faultPoint } from '../step/fault-points';
import { SelectorError } from './flow-errors';
import { describeValue, Halted, NotRecorded, pathOf, PATCH, WHEN, type ChildStateReader, type Decision, type RootBoundary, type Scope } from './flow-scope';
import { stepIdempotencyKey } from '../step/idempotency-guard';
import type { AgentPlan, StepPlan } from '../plan/plan-reader';
import { buildStepRecord, SYSTEM_AGENT, systemRow } from '../history/row-integrity';
import { PauseRequest, StepAbandoned, type AttemptResult, type ExecutionInput, type StepRunner, type StepSite } from '../run/execution';
import { serialize } from '../state/serializer';
import { defineData, deserialize } from '../state/value-decoder';
import { MERGE } from './join-rows';
import type { StateFrame } from '../state/state-frame';
import { StepRecorder } from '../step/step-recorder';
import type { Telemetry } from '../../contract/telemetry';

/**
 * What the control-flow interpreter (flow-executor.ts) does at a leaf of its tree: look a step or a
 * decision up by its path in the recorded rows, or run it and record it; ask a selector and record what
 * it said. The rows of a live run go through one append queue (one sequence, one chain).
 */
export abstract class FlowSteps {
  protected readonly recorded = new Map<string, StepRecord>();
  protected readonly memories = new Map<string, string>();
  private readonly agents = new Map<string, Agent>();
  protected executed = 0;
  protected reused = 0;
  /** Sequences of the rows taken so far and paths of the steps completed so far (a replay's boundaries report them; a live run keeps none). */
  protected readonly consumed = new Set<number>();
  protected lastConsumed = 0;
  protected readonly taken = new Set<string>();
  protected readonly completedPaths: string[] = [];
  /** Records executed steps (a live run only). */
  private readonly recorder: StepRecorder | null;
  /** Where a live run's rows go, in order. */
  protected readonly queue: AppendQueue;

  /** Paths of steps a base row folded (their outputs are in its state) that have no row of their own. */
  private readonly folded: ReadonlySet<string>;
  /** Patch rows with no path (a fork of a straight line): each applies before the first step after it. */
  private readonly loosePatches: StepRecord[] = [];
  /** True when some patch row has a path (a fork's patch before one step of a tree). */
  private readonly pathPatches: boolean;
  /** The step whose row ends the run (the last step of a top-level agent that ends the pipeline): its append closes the run. */
  private readonly closingStep: StepPlan | undefined;
  /** True once a row closed the run (its append set the run `completed`). */
  protected closedByRow = false;
  /** The pipeline has `@Reducer` properties (a step's update may need a merge row). */
  private readonly reducing = Object.keys(this.input.plan.reducers).length > 0;
  /** Lets the event loop turn between steps (see boundary-yield.ts). */
  private readonly yielder = new BoundaryYield();

  constructor(
    protected readonly executor: StepRunner | null,
    protected readonly store: CheckpointStore | null,
    protected readonly clock: Clock | null,
    protected readonly telemetry: Telemetry | null,
    protected readonly input: ExecutionInput,
    protected readonly childState?: ChildStateReader,
    /** Told of every top-level boundary a read-only replay passes (retention chooses where to fold). */
    protected readonly onBoundary?: (boundary: RootBoundary) => void,
  ) {
    let pathPatches = false;
    for (const row of input.restored.rows ?? []) {
      if (row.agentId === SYSTEM_AGENT && row.stepName === 'patch' && !row.path) this.loosePatches.push(row);
      else this.recorded.set(pathOf(row), row);
      if (row.agentId === SYSTEM_AGENT && row.stepName === 'patch' && row.path) pathPatches = true;
    }
    this.pathPatches = pathPatches;
    this.folded = input.restored.folded ?? new Set();
    // A base row's memories (per agent instance) are where the replay starts; rows after it update them.
    for (const [instance, text] of input.restored.memories) this.memories.set(instance, text);
    // Every step in flight listens to the run's stop signal: branches and items put many on it at once.
    if (executor) setMaxListeners(0, input.stop);
    // A read-only replay never appends: its queue has no store to reach.
    this.queue = new AppendQueue(store!, input.fence, input.restored.lastSequence, input.restored.chain.prev);
    this.recorder = executor && store && clock && telemetry ? new StepRecorder(store, clock, telemetry, input) : null;
    const entries = rootEntries(input.plan);
    const last = entries[entries.length - 1];
    this.closingStep = last?.kind === 'agent' ? last.agent.steps[last.agent.steps.length - 1] : undefined;
  }

  protected get live(): boolean {
    return this.executor !== null;
  }

  /** A recorded row by path; the replay notes that it took it. */
  protected take(path: string): StepRecord | undefined {
    const row = this.recorded.get(path);
    if (row && !this.live) {
      this.consumed.add(row.sequence);
      if (row.sequence > this.lastConsumed) this.lastConsumed = row.sequence;
      this.taken.add(path);
    }
    return row;
  }

  protected async step(agentPlan: AgentPlan, step: StepPlan, scope: Scope, frame: StateFrame): Promise<void> {
    // At the top level a step's path is its key and its agent instance its id: no strings built per step.
    const path = scope.path === '' ? step.key : `${scope.path}${step.agentId}/${step.name}`;
    const instance = scope.memory === '' ? step.agentId : `${scope.memory}${step.agentId}`;
    // A fork's patch applies to the state this step sees (and so to its branch, item or iteration).
    if (this.pathPatches) {
      const patch = this.take(`${path}${PATCH}`);
      if (patch) frame.apply(deserialize<Record<string, unknown>>(patch.output));
    }
    const row = this.take(path);
    if (this.loosePatches.length > 0) this.applyLoosePatches(frame, row);
    if (row) return this.reuse(row, step, path, instance, frame, agentPlan.index);
    if (this.folded.has(path)) {
      // Folded into the base row the replay started from: its output is in the state already.
      if (!this.live) this.completedPaths.push(path);
      this.reused += 1;
      return;
    }
    this.checkGo(scope);
    // With synchronous writes (memory, SQLite) and quick steps nothing else would let a due SIGTERM handler,
    // deadline timer or lease heartbeat run: the run turns the event loop at a step once a millisecond. A stop
    // seen then starts nothing; a sibling's failure seen then does not stop a step already let through.
    if (this.executed > 0 && this.yielder.due()) {
      await this.yielder.turn();
      this.checkStop();
    }
    const site: StepSite = { path, iteration: scope.iteration, item: scope.item, itemIndex: scope.itemIndex };
    if (step.when) {
      const decided = this.decisionAt(`${path}${WHEN}`);
      if (decided === undefined) {
        const go = this.select(
          () => step.when!(frame.view),
          path,
          'when condition',
          (v) => typeof v === 'boolean',
        );
        if (!go) {
          await this.recordSkip(agentPlan, step, path, scope);
          return;
        }
        await this.recordDecision(`${path}${WHEN}`, true, agentPlan.index);
      }
    }
    await this.execute(agentPlan, step, site, instance, frame, scope);
  }

  /** A recorded step: its output merged (and its merge row taken), its agent's memory taken, nothing run. */
  private async reuse(row: StepRecord, step: StepPlan, path: string, instance: string, frame: StateFrame, agentIndex: number): Promise<void> {
    if (step.when) this.take(`${path}${WHEN}`); // the yes that preceded the step's row
    if (row.memory !== null) this.memories.set(instance, row.memory);
    if (row.status !== 'skipped') {
      const update = deserialize<Record<string, unknown>>(row.output);
      frame.apply(update);
      await this.merged(path, update, frame, agentIndex);
    }
    if (!this.live) this.completedPaths.push(path); // only a replay's boundaries report it
    this.reused += 1;
  }

  /** Applies the path-less patches recorded before `row` (before the first unrecorded step when `row` is undefined). */
  private applyLoosePatches(frame: StateFrame, row: StepRecord | undefined): void {
    while (this.loosePatches.length > 0 && (row === undefined || this.loosePatches[0].sequence < row.sequence)) {
      const patch = this.loosePatches.shift()!;
      if (!this.live) {
        this.consumed.add(patch.sequence);
        if (patch.sequence > this.lastConsumed) this.lastConsumed = patch.sequence;
      }
      frame.apply(deserialize<Record<string, unknown>>(patch.output));
    }
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

  /** Runs one step (retries, timeout, side effects inside) and records it; then merges its output. */
  private async execute(agentPlan: AgentPlan, step: StepPlan, site: StepSite, instance: string, frame: StateFrame, scope: Scope): Promise<void> {
    const { runId } = this.input;
    const executor = this.executor!;
    const agent = this.agentFor(agentPlan, instance, site.path);
    let attempt: AttemptResult;
    try {
      attempt = await this.telemetry!.span('waypoint.step', { 'waypoint.run_id': runId, 'waypoint.step': site.path, 'waypoint.restored': false }, () =>
        executor.runAttempts(this.input, step, agent, frame.view, this.queue.sequence + 1, site),
      );
    } catch (error) {
      if (error instanceof StepAbandoned && !error.message) throw new StepAbandoned(`step '${site.path}' was not completed and runs again on resume`);
      throw error;
    }
    let update: Record<string, unknown>;
    try {
      const recorder = this.recorder!;
      const prepared = recorder.prepare(step, site.path, attempt, agent, this.memories.get(instance));
      faultPoint('after-record-before-checkpoint');
      const writeStart = performance.now();
      const record = await this.queue.append((sequence, prev) => recorder.record(prepared, sequence, prev), this.cursorAfter(step, scope), attempt.transaction);
      faultPoint('after-checkpoint-before-next-step');
      recorder.completed(prepared, record, performance.now() - writeStart);
      if (prepared.memory !== null) this.memories.set(instance, prepared.memory);
      this.recorded.set(site.path, record);
      frame.apply((update = prepared.update));
      this.executed += 1;
    } catch (error) {
      await attempt.transaction?.rollback();
      throw error;
    }
    await this.merged(site.path, update, frame, agentPlan.index);
  }

  /**
   * After a step's update reached a `@Reducer` property of the run's own frame: its merge row (the merged
   * values, so a reader needs no reducer; core/flow/join-rows.ts). A replay takes it; a live run writes it when
   * it is missing (also after a crash between the step's row and this one).
   */
  private async merged(path: string, update: Record<string, unknown>, frame: StateFrame, agentIndex: number): Promise<void> {
    if (!this.input.restored.joins || !frame.root || !this.reducing) return;
    const reducers = this.input.plan.reducers;
    let merged: Record<string, unknown> | undefined;
    for (const key of Object.keys(update)) {
      if (Object.prototype.hasOwnProperty.call(reducers, key)) defineData((merged ??= {}), key, frame.view[key]);
    }
    if (!merged || this.take(`${path}${MERGE}`) || !this.live) return;
    const output = serialize(merged, { runId: this.input.runId, step: path, what: 'merged reducer values' });
    await this.recordSystem('merge', `${path}${MERGE}`, output, agentIndex);
  }

  private agentFor(agentPlan: AgentPlan, instance: string, path: string): Agent {
    let agent = this.agents.get(instance);
    if (agent) return agent;
    const saved = this.memories.get(instance);
    agent = this.executor!.createAgent(agentPlan.type, saved, this.input.runId);
    if (saved === undefined) this.memories.set(instance, serialize(agent.snapshot(), { runId: this.input.runId, step: path, what: `initial memory of agent '${agentPlan.id}'` }));
    this.agents.set(instance, agent);
    return agent;
  }

  /** Before starting anything new: stop on a pause or a sibling's failure; a read-only replay stops here. */
  protected checkGo(scope: Scope): void {
    if (!this.live) throw new NotRecorded();
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

  protected select<T>(fn: () => unknown, at: string, what: string, ok: (value: unknown) => boolean): T {
    let value: unknown;
    try {
      value = fn();
    } catch (error) {
      throw new SelectorError(this.input.runId, at, what, error);
    }
    if (!ok(value)) throw new SelectorError(this.input.runId, at, `${what} returned ${describeValue(value)}, which is not what it must return`);
    return value as T;
  }

  protected decisionAt(path: string): unknown {
    const row = this.take(path);
    return row ? deserialize<Decision>(row.output).value : undefined;
  }

  protected async recordDecision(path: string, value: unknown, agentIndex: number): Promise<void> {
    await this.recordSystem('decision', path, serialize({ value }, { runId: this.input.runId, step: path, what: 'decision' }), agentIndex);
  }

  /** Appends a system row of a control-flow run at `path` (a decision, a construct's join, a step's merge). */
  protected async recordSystem(kind: 'decision' | 'join' | 'merge', path: string, output: string, agentIndex: number): Promise<void> {
    const { runId } = this.input;
    const row = await this.queue.append(
      (sequence, prev) => ({
        ...systemRow(runId, sequence, kind, output, null, this.clock!.now(), this.input.integrity, { identity: this.input.restored.chain.identity, prev }, path),
      }),
      { cursorAgent: Math.max(0, agentIndex), cursorStep: 0, status: 'running', resumeHint: null },
    );
    this.recorded.set(path, row);
  }

  private async recordSkip(agentPlan: AgentPlan, step: StepPlan, path: string, scope: Scope): Promise<void> {
    const { runId } = this.input;
    const now = this.clock!.now();
    const row = await this.queue.append(
      (sequence, prev) =>
        buildStepRecord(
          {
            runId,
            sequence,
            step,
            output: '{}',
            memory: null,
            idempotencyKey: stepIdempotencyKey(runId, step.agentId, path === step.key ? step.name : path),
            sideEffectsCommitted: false,
            startedAt: now,
            completedAt: now,
            attempt: 0,
            status: 'skipped',
          },
          this.input.integrity,
          { identity: this.input.restored.chain.identity, prev },
          path === `${step.agentId}/${step.name}` ? null : path,
        ),
      this.cursorAfter(step, scope),
    );
    this.recorded.set(path, row);
  }
}
