import { setMaxListeners } from 'node:events';
import type { CheckpointStore, StepRecord } from '../contract/checkpoint-store';
import type { Agent } from '../contract/agent';
import { AppendQueue } from './append-queue';
import type { Clock } from '../contract/clock';
import { faultPoint } from './fault-points';
import { SelectorError } from './flow-errors';
import { describeValue, Halted, NotRecorded, pathOf, PATCH, WHEN, type ChildStateReader, type Decision, type RootBoundary, type Scope } from './flow-scope';
import { stepIdempotencyKey } from './idempotency-guard';
import type { AgentPlan, StepPlan } from './plan-reader';
import { buildStepRecord, systemRow } from './row-integrity';
import { PauseRequest, StepAbandoned, type ExecutionInput, type StepRunner, type StepSite } from './execution';
import { serialize } from './serializer';
import { defineData, deserialize } from './value-decoder';
import { MERGE } from './join-rows';
import type { StateFrame } from './state-frame';
import { StepRecorder } from './step-recorder';
import type { Telemetry } from '../contract/telemetry';

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
  protected readonly taken = new Set<string>();
  protected readonly completedPaths: string[] = [];
  /** Records executed steps (a live run only). */
  private readonly recorder: StepRecorder | null;
  /** Where a live run's rows go, in order. */
  protected readonly queue: AppendQueue;

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
    for (const row of input.restored.rows ?? []) this.recorded.set(pathOf(row), row);
    // A base row's memories (per agent instance) are where the replay starts; rows after it update them.
    for (const [instance, text] of input.restored.memories) this.memories.set(instance, text);
    // Every step in flight listens to the run's stop signal: branches and items put many on it at once.
    if (executor) setMaxListeners(0, input.stop);
    // A read-only replay never appends: its queue has no store to reach.
    this.queue = new AppendQueue(store!, input.fence, input.restored.lastSequence, input.restored.chain.prev);
    this.recorder = executor && store && clock && telemetry ? new StepRecorder(store, clock, telemetry, input) : null;
  }

  protected get live(): boolean {
    return this.executor !== null;
  }

  /** A recorded row by path; the replay notes that it took it. */
  protected take(path: string): StepRecord | undefined {
    const row = this.recorded.get(path);
    if (row && !this.live) {
      this.consumed.add(row.sequence);
      this.taken.add(path);
    }
    return row;
  }

  protected async step(agentPlan: AgentPlan, step: StepPlan, scope: Scope, frame: StateFrame): Promise<void> {
    const path = `${scope.path}${step.agentId}/${step.name}`;
    const instance = `${scope.memory}${step.agentId}`;
    // A fork's patch applies to the state this step sees (and so to its branch, item or iteration).
    const patch = this.take(`${path}${PATCH}`);
    if (patch) frame.apply(deserialize<Record<string, unknown>>(patch.output));
    const row = this.take(path);
    if (row) {
      if (step.when) this.take(`${path}${WHEN}`); // the yes that preceded the step's row
      if (row.memory !== null) this.memories.set(instance, row.memory);
      if (row.status !== 'skipped') {
        const update = deserialize<Record<string, unknown>>(row.output);
        frame.apply(update);
        await this.merged(path, update, frame, agentPlan.index);
      }
      if (!this.live) this.completedPaths.push(path); // only a replay's boundaries report it
      this.reused += 1;
      return;
    }
    // Yield once per boundary: with synchronous SQLite writes and quick steps nothing else would let a due
    // SIGTERM handler, deadline timer or lease heartbeat run before the next step starts.
    if (this.executed > 0) await new Promise((resolve) => setImmediate(resolve));
    this.checkGo(scope);
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
          await this.recordSkip(agentPlan, step, path);
          return;
        }
        await this.recordDecision(`${path}${WHEN}`, true, agentPlan.index);
      }
    }
    await this.execute(agentPlan, step, site, instance, frame);
  }

  /** Runs one step (retries, timeout, side effects inside) and records it; then merges its output. */
  private async execute(agentPlan: AgentPlan, step: StepPlan, site: StepSite, instance: string, frame: StateFrame): Promise<void> {
    const { runId } = this.input;
    const executor = this.executor!;
    const agent = this.agentFor(agentPlan, instance, site.path);
    const attempt = await this.telemetry!.span('waypoint.step', { 'waypoint.run_id': runId, 'waypoint.step': site.path, 'waypoint.restored': false }, () =>
      executor.runAttempts(this.input, step, agent, frame.view, this.queue.sequence + 1, site),
    );
    let update: Record<string, unknown>;
    try {
      const recorder = this.recorder!;
      const prepared = recorder.prepare(step, site.path, attempt, agent, this.memories.get(instance));
      faultPoint('after-record-before-checkpoint');
      const writeStart = performance.now();
      const record = await this.queue.append((sequence, prev) => recorder.record(prepared, sequence, prev), agentPlan.index, step.stepIndex, attempt.transaction);
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
   * values, so a reader needs no reducer; core/join-rows.ts). A replay takes it; a live run writes it when
   * it is missing (also after a crash between the step's row and this one).
   */
  private async merged(path: string, update: Record<string, unknown>, frame: StateFrame, agentIndex: number): Promise<void> {
    if (!this.input.restored.joins || !frame.root) return;
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
    const { stop } = this.input;
    if (stop.aborted) {
      if (stop.reason instanceof PauseRequest) throw new StepAbandoned();
      throw stop.reason;
    }
    if (scope.halt.halted) throw new Halted();
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
      agentIndex,
      0,
    );
    this.recorded.set(path, row);
  }

  private async recordSkip(agentPlan: AgentPlan, step: StepPlan, path: string): Promise<void> {
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
      agentPlan.index,
      step.stepIndex,
    );
    this.recorded.set(path, row);
  }
}
