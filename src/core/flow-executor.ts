import { setMaxListeners } from 'node:events';
import type { CheckpointStore, StepAppend, StepRecord } from '../contract/checkpoint-store';
import type { Agent } from './agent';
import type { Clock } from './clock';
import { WaypointError } from './errors';
import { faultPoint } from './fault-points';
import { ItemFailedError, LoopLimitError, ParallelConflictError, SelectorError, UnknownBranchError } from './flow-errors';
import type { AgentNode, BranchNode, FlowNode, ForEachNode, LoopNode, ParallelNode } from './flow-plan';
import { stepIdempotencyKey } from './idempotency-guard';
import type { AgentPlan, PipelinePlan, StepPlan } from './plan-reader';
import { buildStepRecord, rowPath, SYSTEM_AGENT, systemRow } from './row-integrity';
import { PauseRequest, StepAbandoned, type ExecutionInput, type ExecutionOutcome, type FlowStart, type StepRunner, type StepSite } from './execution';
import { entryKey, rootEntries } from './flow-base';
import { resumeHintFor } from './run-status';
import { deserialize, serialize } from './serializer';
import { assertSecretsProtected, StateFrame, validateUpdate, type SharedState } from './state-schema';
import type { Telemetry } from './telemetry';
import { WaitSuspended } from './durable-waits';
import { itemPlanOf } from './fan-out';

/** Where a node runs: the path prefix of its steps, its memory prefix, and the loop/item around it. */
interface Scope {
  path: string;
  memory: string;
  iteration?: number;
  item?: unknown;
  itemIndex?: number;
  /** Set when a sibling failed or the run is stopping: start nothing new here. */
  halt: Halt;
}

/** A stop flag shared by the branches of a parallel (or the items of a forEach), inherited downwards. */
class Halt {
  private own = false;
  constructor(private readonly parent?: Halt) {}
  get halted(): boolean {
    return this.own || (this.parent?.halted ?? false);
  }
  set(): void {
    this.own = true;
  }
}

/** Thrown inside a branch that stopped because a sibling failed; the sibling's error is what counts. */
class Halted extends Error {}

/** Thrown by a read-only replay at the first thing that was not recorded yet. */
class NotRecorded extends Error {}

/** A recorded decision's payload. */
interface Decision {
  value: unknown;
}

/**
 * Loads a child run's state for a read-only replay (null when the child has not completed). With
 * `collectIndex` (a forEach with `onItemError: 'collect'`), a failed or cancelled child gives the error
 * description its parent collected for item `collectIndex`.
 */
export type ChildStateReader = (child: PipelinePlan, runId: string, collectIndex?: number) => Promise<Record<string, unknown> | null>;

/**
 * A point of the top level where everything before is done: after the first `done` entries of the root
 * sequence, or inside the loop at entry `done` after `iterations` iterations. Retention folds the rows
 * before such a point into a base row; `consumed` holds the sequences of the rows the replay took to get there.
 */
export interface RootBoundary extends FlowStart {
  state: Record<string, unknown>;
  memories: Map<string, string>;
  consumed: ReadonlySet<number>;
  /** Paths of the rows (and carried entries) taken to get there. */
  taken: ReadonlySet<string>;
  /** Paths of the steps completed before the boundary (skips included). */
  completed: string[];
}

/** Suffixes of decision paths: a step's `when`, a loop's check after an iteration; and of a fork's patch before a step. */
const WHEN = '#when';
const UNTIL = '#until';
const PATCH = '#patch';

/**
 * Runs a control-flow pipeline as an interpreter over its tree. Every step and decision is looked up by
 * its path in the recorded rows first: a recorded step's output is applied without running it, a
 * recorded decision is followed without asking its selector again. What is not recorded runs and is
 * recorded the moment it ends. Appends are serialized (one sequence, one chain) while branches and items
 * run concurrently; at most `concurrency` items are unrecorded at once because an item's slot frees only
 * after its last record commits.
 *
 * The same interpreter with no executor is a read-only replay: it rebuilds the state from rows and stops
 * each branch at its first unrecorded step.
 */
export class FlowExecution {
  private readonly recorded = new Map<string, StepRecord>();
  private readonly memories = new Map<string, string>();
  private readonly agents = new Map<string, Agent>();
  private sequence: number;
  private prev: string;
  private executed = 0;
  private reused = 0;
  /** Sequences of the rows taken so far and paths of the steps completed so far (boundaries report them). */
  private readonly consumed = new Set<number>();
  private readonly taken = new Set<string>();
  private readonly completedPaths: string[] = [];
  /** `executed` when retention last ran. */
  private compactedAt = 0;

  constructor(
    private readonly executor: StepRunner | null,
    private readonly store: CheckpointStore | null,
    private readonly clock: Clock | null,
    private readonly telemetry: Telemetry | null,
    private readonly input: ExecutionInput,
    private readonly childState?: ChildStateReader,
    /** Told of every top-level boundary a read-only replay passes (retention chooses where to fold). */
    private readonly onBoundary?: (boundary: RootBoundary) => void,
  ) {
    for (const row of input.restored.rows ?? []) this.recorded.set(pathOf(row), row);
    // A base row's memories (per agent instance) are where the replay starts; rows after it update them.
    for (const [instance, text] of input.restored.memories) this.memories.set(instance, text);
    // Every step in flight listens to the run's stop signal: branches and items put many on it at once.
    if (executor) setMaxListeners(0, input.stop);
    this.sequence = input.restored.lastSequence;
    this.prev = input.restored.chain.prev;
  }

  private get live(): boolean {
    return this.executor !== null;
  }

  /** Runs the tree to its end (or a pause, a wait, a failure) and closes the run when it completes. */
  async run(): Promise<ExecutionOutcome> {
    const { plan, stop } = this.input;
    const frame = new StateFrame(this.input.restored.state, plan.reducers);
    const scope: Scope = { path: '', memory: '', halt: new Halt(), item: this.input.item?.value, itemIndex: this.input.item?.index };
    try {
      await this.root(scope, frame);
    } catch (error) {
      const outcome = (status: ExecutionOutcome['status'], detail?: string): ExecutionOutcome => ({
        status,
        detail,
        state: frame.view,
        stepsExecuted: this.executed,
        stepsReused: this.reused,
        lastSequence: this.sequence,
      });
      if (error instanceof StepAbandoned || error instanceof Halted) {
        if (stop.aborted && !(stop.reason instanceof PauseRequest)) throw stop.reason;
        return outcome('paused', error instanceof StepAbandoned ? error.message || undefined : undefined);
      }
      if (error instanceof WaitSuspended) return outcome('waiting', `for signal '${error.signalName}'`);
      if (error instanceof ChildWaiting) return outcome('waiting', error.message);
      throw error;
    }
    if (this.live) {
      await this.store!.updateRun(this.input.runId, { status: 'completed', resumeHint: resumeHintFor(this.input.runId, 'completed') }, this.input.fence);
    }
    return { status: 'completed', state: frame.view, stepsExecuted: this.executed, stepsReused: this.reused, lastSequence: this.sequence, closed: this.live };
  }

  /** Read-only replay: the state the recorded rows give (each branch up to its first unrecorded step). */
  async replay(): Promise<SharedState> {
    const frame = new StateFrame(this.input.restored.state, this.input.plan.reducers);
    try {
      await this.root({ path: '', memory: '', halt: new Halt(), item: this.input.item?.value, itemIndex: this.input.item?.index }, frame);
    } catch (error) {
      if (!(error instanceof NotRecorded)) throw error;
    }
    return frame.view;
  }

  /**
   * The top level: its entries in order from where the base row (if any) left off. After each entry, and
   * after each iteration of a top-level loop, nothing before is in flight: a read-only replay reports the
   * point to retention there, a live run lets retention fold what lies before it.
   */
  private async root(scope: Scope, frame: StateFrame): Promise<void> {
    const entries = rootEntries(this.input.plan);
    const start = this.input.restored.flowStart;
    const keys = entries.map(entryKey);
    for (let done = start?.done ?? 0; done < entries.length; done++) {
      const entry = entries[done];
      const boundary = (iterations?: number) => this.boundary(frame, { done, doneKeys: keys.slice(0, done), iterations });
      if (entry.kind === 'loop') await this.loop(entry, scope, frame, done === start?.done ? (start.iterations ?? 0) : 0, (n) => boundary(n));
      else await this.node(entry, scope, frame);
      await this.boundary(frame, { done: done + 1, doneKeys: keys.slice(0, done + 1) });
    }
  }

  private async boundary(frame: StateFrame, at: FlowStart): Promise<void> {
    if (!this.live) {
      const state = deserialize<Record<string, unknown>>(serialize({ ...frame.view }, { runId: this.input.runId, what: 'state at a top-level boundary' }));
      this.onBoundary?.({ ...at, state, memories: new Map(this.memories), consumed: new Set(this.consumed), taken: new Set(this.taken), completed: [...this.completedPaths] });
      return;
    }
    const compaction = this.input.compaction;
    if (!compaction || this.executed - this.compactedAt < compaction.every) return;
    this.compactedAt = this.executed;
    try {
      await compaction.compact(this.input.runId);
    } catch (error) {
      // Retention must never fail a run: a failed compaction leaves more rows behind, nothing else.
      this.input.logger.warn('compaction failed; rows are kept', { error: error instanceof Error ? error.message : String(error) });
    }
  }

  /** A recorded row by path; the replay notes that it took it. */
  private take(path: string): StepRecord | undefined {
    const row = this.recorded.get(path);
    if (row && !this.live) {
      this.consumed.add(row.sequence);
      this.taken.add(path);
    }
    return row;
  }

  private async node(node: FlowNode, scope: Scope, frame: StateFrame): Promise<void> {
    switch (node.kind) {
      case 'agent':
        return this.agent(node, scope, frame);
      case 'sequence':
        for (const child of node.children) await this.node(child, scope, frame);
        return;
      case 'parallel':
        return this.parallel(node, scope, frame);
      case 'loop':
        return this.loop(node, scope, frame);
      case 'branch':
        return this.branch(node, scope, frame);
      case 'forEach':
        return this.forEach(node, scope, frame);
    }
  }

  private async agent(node: AgentNode, scope: Scope, frame: StateFrame): Promise<void> {
    for (const step of node.agent.steps) await this.step(node.agent, step, scope, frame);
  }

  private async step(agentPlan: AgentPlan, step: StepPlan, scope: Scope, frame: StateFrame): Promise<void> {
    const path = `${scope.path}${step.agentId}/${step.name}`;
    const instance = `${scope.memory}${step.agentId}`;
    // A fork's patch applies to the state this step sees (and so to its branch, item or iteration).
    const patch = this.take(`${path}${PATCH}`);
    if (patch) frame.apply(deserialize<Record<string, unknown>>(patch.output));
    const row = this.take(path);
    if (row) {
      if (step.when) this.take(`${path}${WHEN}`); // the yes that preceded the step's row
      if (row.status !== 'skipped') frame.apply(deserialize<Record<string, unknown>>(row.output));
      if (row.memory !== null) this.memories.set(instance, row.memory);
      this.completedPaths.push(path);
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
    const { runId, plan } = this.input;
    const executor = this.executor!;
    const agent = this.agentFor(agentPlan, instance, site.path);
    const where = { runId, step: site.path };
    const attempt = await this.telemetry!.span('waypoint.step', { 'waypoint.run_id': runId, 'waypoint.step': site.path, 'waypoint.restored': false }, () =>
      executor.runAttempts(this.input, step, agent, frame.view, this.sequence + 1, site),
    );
    try {
      assertSecretsProtected(plan.secrets, this.input.encrypted, attempt.output, { ...where, what: 'output' });
      const outputText = serialize(attempt.output, { ...where, what: 'output' });
      const memoryText = serialize(agent.snapshot(), { ...where, what: `memory of agent '${step.agentId}'` });
      const memory = memoryText === this.memories.get(instance) ? null : memoryText;
      const update = deserialize<Record<string, unknown>>(outputText);
      if (this.input.validateEveryStep) validateUpdate(plan.state, update, { runId, step: site.path, phase: 'produced' });
      faultPoint('after-record-before-checkpoint');
      const writeStart = performance.now();
      const record = await this.append(
        (sequence, prev) =>
          buildStepRecord(
            {
              runId,
              sequence,
              step,
              output: outputText,
              memory,
              idempotencyKey: stepIdempotencyKey(runId, step.agentId, site.path === step.key ? step.name : site.path),
              sideEffectsCommitted: attempt.committed.length > 0,
              startedAt: attempt.startedAt,
              completedAt: this.clock!.now(),
              attempt: attempt.attempt,
            },
            this.input.integrity,
            { identity: this.input.restored.chain.identity, prev },
            site.path === `${step.agentId}/${step.name}` ? null : site.path,
          ),
        agentPlan.index,
        step.stepIndex,
        attempt.transaction,
      );
      faultPoint('after-checkpoint-before-next-step');
      this.telemetry!.stepCompleted({
        runId,
        pipeline: plan.name,
        step: site.path,
        sequence: record.sequence,
        backend: this.store!.backend,
        attempt: attempt.attempt,
        durationMs: record.completedAt.getTime() - record.startedAt.getTime(),
        checkpointMs: performance.now() - writeStart,
        bytes: outputText.length + (memory?.length ?? 0),
      });
      if (memory !== null) this.memories.set(instance, memory);
      this.recorded.set(site.path, record);
      frame.apply(update);
      this.executed += 1;
    } catch (error) {
      await attempt.transaction?.rollback();
      throw error;
    }
  }

  private agentFor(agentPlan: AgentPlan, instance: string, path: string): Agent {
    let agent = this.agents.get(instance);
    if (agent) return agent;
    const saved = this.memories.get(instance);
    agent = this.executor!.createAgent(agentPlan.type, saved);
    if (saved === undefined) this.memories.set(instance, serialize(agent.snapshot(), { runId: this.input.runId, step: path, what: `initial memory of agent '${agentPlan.id}'` }));
    this.agents.set(instance, agent);
    return agent;
  }

  private async parallel(node: ParallelNode, scope: Scope, frame: StateFrame): Promise<void> {
    const halt = new Halt(scope.halt);
    const frames = node.branches.map(() => frame.fork());
    const settled = await Promise.allSettled(
      node.branches.map(async (branch, i) => {
        try {
          await this.node(branch, { ...scope, path: `${scope.path}${node.label}[${i}]/`, memory: `${scope.memory}${node.label}[${i}]/`, halt }, frames[i]);
        } catch (error) {
          halt.set(); // the other branches finish the steps they are running and start nothing new
          throw error;
        }
      }),
    );
    const incomplete = this.worstOf(settled);
    // The join: each branch's own updates in declaration order; a reducer merges, anything else must be set by one branch.
    const setBy = new Map<string, number>();
    frames.forEach((branchFrame, i) => {
      const changes = branchFrame.changes();
      for (const key of Object.keys(changes)) {
        const first = setBy.get(key);
        if (first !== undefined && !Object.prototype.hasOwnProperty.call(this.input.plan.reducers, key) && !incomplete) {
          throw new ParallelConflictError(this.input.runId, `${scope.path}${node.label}`, key, `${node.label}[${first}]`, `${node.label}[${i}]`);
        }
        if (first === undefined) setBy.set(key, i);
      }
      frame.apply(changes);
    });
    // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows the worst branch's own rejection reason unchanged
    if (incomplete) throw incomplete;
  }

  private async loop(node: LoopNode, scope: Scope, frame: StateFrame, from = 0, afterIteration?: (iterations: number) => Promise<void>): Promise<void> {
    const at = `${scope.path}${node.label}`;
    for (let iteration = from; ; iteration++) {
      if (iteration >= node.maxIterations) {
        if (!this.live) throw new NotRecorded(); // a replay shows the state the failed loop kept
        throw new LoopLimitError(this.input.runId, at, node.maxIterations);
      }
      await this.node(node.body, { ...scope, path: `${at}[${iteration}]/`, memory: `${scope.memory}${node.label}/`, iteration }, frame);
      const decisionPath = `${at}[${iteration}]${UNTIL}`;
      let done = this.decisionAt(decisionPath) as boolean | undefined;
      if (done === undefined) {
        this.checkGo(scope);
        done = this.select(
          () => node.until(frame.view),
          at,
          'until condition',
          (v) => typeof v === 'boolean',
        );
        await this.recordDecision(decisionPath, done, -1);
      }
      if (done) return;
      await afterIteration?.(iteration + 1);
    }
  }

  private async branch(node: BranchNode, scope: Scope, frame: StateFrame): Promise<void> {
    const at = `${scope.path}${node.label}`;
    let key = this.decisionAt(at) as string | undefined;
    if (key === undefined) {
      this.checkGo(scope);
      key = this.select<string>(
        () => node.select(frame.view),
        at,
        'selector',
        (v) => typeof v === 'string',
      );
      if (!node.cases.has(key)) throw new UnknownBranchError(this.input.runId, at, key, [...node.cases.keys()]);
      await this.recordDecision(at, key, -1);
    }
    const chosen: string = key;
    const body = node.cases.get(chosen);
    if (!body) throw new UnknownBranchError(this.input.runId, at, chosen, [...node.cases.keys()]);
    await this.node(body, { ...scope, path: `${at}[${chosen}]/`, memory: `${scope.memory}${node.label}[${chosen}]/` }, frame);
  }

  private async forEach(node: ForEachNode, scope: Scope, frame: StateFrame): Promise<void> {
    const at = `${scope.path}${node.label}`;
    let items = this.decisionAt(at) as unknown[] | undefined;
    if (items === undefined) {
      this.checkGo(scope);
      items = this.select<unknown[]>(
        () => node.items(frame.view),
        at,
        'item selector',
        (v) => Array.isArray(v),
      );
      // The list is recorded as decoded, so items are what a resumed run would read back.
      items = deserialize<Decision>(serialize({ value: items }, { runId: this.input.runId, step: at, what: `item list of '${at}'` })).value as unknown[];
      await this.recordDecision(at, items, -1);
    }
    const list = items;
    if ((node.child || node.distributed) && this.live && this.input.fanOut) return this.fanOutItems(node, scope, frame, at, list);
    const results: unknown[] = new Array(list.length);
    const halt = new Halt(scope.halt);
    const failures: { index: number; error: unknown }[] = [];
    let incomplete = false;
    let next = 0;
    const worker = async () => {
      while (next < list.length && !halt.halted) {
        const index = next++;
        try {
          results[index] = await this.item(node, scope, frame, list[index], index, halt);
        } catch (error) {
          if (error instanceof NotRecorded) {
            // A read-only replay shows what an unfinished item has recorded so far.
            incomplete = true;
            results[index] = (error as NotRecorded & { partial?: unknown }).partial;
            continue;
          }
          failures.push({ index, error });
          halt.set(); // running items end and are recorded; no new item starts
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(node.concurrency, list.length) }, () => worker()));
    if (failures.length > 0) {
      failures.sort((a, b) => a.index - b.index);
      const worst = this.worstOf(failures.map((f) => ({ status: 'rejected' as const, reason: f.error })));
      const first = failures.find((f) => f.error === worst)!;
      if (isRealFailure(worst) && !(worst instanceof WaypointError && (worst.code === 'LEASE_LOST' || worst.code === 'ITEM_FAILED'))) {
        throw new ItemFailedError(this.input.runId, at, first.index, worst);
      }
      throw worst;
    }
    const update = { [node.into]: results };
    if (this.live && this.input.validateEveryStep) validateUpdate(this.input.plan.state, update, { runId: this.input.runId, step: at, phase: 'collected by forEach' });
    frame.apply(update);
    if (incomplete) throw new NotRecorded();
  }

  /** One item: its own frame from the state at the forEach, or a child run; returns what lands in `state[into][i]`. */
  private async item(node: ForEachNode, scope: Scope, frame: StateFrame, item: unknown, index: number, halt: Halt): Promise<unknown> {
    const at = `${scope.path}${node.label}`;
    if (node.child) return this.child(node, scope, at, item, index, halt);
    if (node.distributed && !this.live && this.childState) {
      // A replay of a run whose items went to the fleet: the item's hidden child run holds its records.
      const changes = await this.childState(itemPlanOf(this.input.plan, node), `${this.input.runId}/${scope.path}${node.into}/${index}`);
      if (changes !== null) return changes;
    }
    if (node.distributed && this.live && this.input.itemChild) {
      // Run without a fleet after the items went to one: an item whose hidden child run exists is that run, never run twice.
      const runId = `${this.input.runId}/${scope.path}${node.into}/${index}`;
      if (halt.halted || this.input.stop.aborted) throw new Halted();
      // An item still leased by a fleet worker fails it with RUN_LOCKED (the parent is resumed again later): a parent
      // left waiting would be woken onto the fleet, which does not know the items run here.
      const result = await this.input.itemChild(itemPlanOf(this.input.plan, node), { runId, signal: this.input.stop });
      if (result !== null) {
        if (result.status === 'completed') return result.state;
        if (result.status === 'failed' || result.status === 'cancelled') throw result.error;
        if (result.status === 'waiting') throw new ChildWaiting(`item run '${runId}' is waiting${result.detail ? ` (${result.detail})` : ''}; resume this run after it ends`);
        throw new StepAbandoned(`item run '${runId}' ${result.status}`);
      }
    }
    const itemFrame = frame.fork();
    try {
      await this.node(
        node.body!,
        { path: `${at}[${index}]/`, memory: `${scope.memory}${node.label}[${index}]/`, iteration: scope.iteration, item, itemIndex: index, halt },
        itemFrame,
      );
    } catch (error) {
      if (error instanceof NotRecorded) throw Object.assign(error, { partial: itemFrame.changes() });
      throw error;
    }
    return itemFrame.changes();
  }

  private async child(node: ForEachNode, scope: Scope, at: string, item: unknown, index: number, halt: Halt): Promise<unknown> {
    // `<parent>/<into>/<index>`; inside another construct the scope is part of it, so two items of an
    // outer forEach (or two branches) never share a child: `<parent>/forEach(files)[3]/reports/0`.
    const runId = `${this.input.runId}/${scope.path}${node.into}/${index}`;
    if (!this.live) {
      const state = this.childState ? await this.childState(node.child!, runId, node.onItemError === 'collect' ? index : undefined) : null;
      if (state === null) throw new NotRecorded();
      return state;
    }
    if (halt.halted || this.input.stop.aborted) throw new Halted();
    if (!this.input.runChild)
      throw new WaypointError('CHILD_RUNS_UNAVAILABLE', `Run '${this.input.runId}': '${at}' runs child pipelines, which this executor cannot start.`, {
        runId: this.input.runId,
        step: at,
      });
    const input = isPlainObject(item) ? (item as Record<string, unknown>) : {};
    let result;
    try {
      result = await this.input.runChild(node.child!, {
        runId,
        parentRunId: this.input.runId,
        input,
        item,
        itemIndex: index,
        signal: this.input.stop,
        collect: node.onItemError === 'collect',
      });
    } catch (error) {
      // 'collect': the child's own failure (recorded with the child) becomes the item's result; the parent's lease loss stays the parent's.
      if (node.onItemError === 'collect' && isRealFailure(error) && !(error instanceof WaypointError && error.code === 'LEASE_LOST' && error.runId === this.input.runId)) {
        return itemError(error, runId, error instanceof WaypointError && error.code === 'RUN_CANCELLED' ? 'cancelled' : 'failed', index);
      }
      throw error;
    }
    if (result.status === 'completed') return result.state;
    if ((result.status === 'failed' || result.status === 'cancelled') && node.onItemError === 'collect') return itemError(result.error, runId, result.status, index);
    if (result.status === 'waiting') throw new ChildWaiting(`child run '${runId}' is waiting${result.detail ? ` (${result.detail})` : ''}; resume this run after it ends`);
    throw new StepAbandoned(`child run '${runId}' ${result.status}`);
  }

  /**
   * A forEach over a `@Pipeline` class (or a distributed agent or sequence body) in a run a fleet worker
   * executes: the child runs are queued for the fleet (see fan-out.ts); the parent waits until they have
   * ended, then reads their states (an item body's merged outputs) in item order.
   */
  private async fanOutItems(node: ForEachNode, scope: Scope, frame: StateFrame, at: string, list: unknown[]): Promise<void> {
    this.checkGo(scope);
    const { runId } = this.input;
    const outcome = await this.input.fanOut!(node.child ?? itemPlanOf(this.input.plan, node), {
      parentRunId: runId,
      at,
      runIdOf: (index) => `${runId}/${scope.path}${node.into}/${index}`,
      items: list,
      concurrency: node.concurrency,
      onItemError: node.onItemError,
      // An agent or sequence body's items start from the state at the forEach, as in process.
      ...(node.child ? {} : { state: { ...frame.view } }),
    });
    if (outcome.status === 'waiting') throw new ChildWaiting(outcome.detail);
    if (outcome.failed) throw new ItemFailedError(runId, at, outcome.failed.index, outcome.failed.error);
    const update = { [node.into]: outcome.results };
    if (this.input.validateEveryStep) validateUpdate(this.input.plan.state, update, { runId, step: at, phase: 'collected by forEach' });
    frame.apply(update);
  }

  /** Of several outcomes, what the whole should end with: a failure, else a stop, else a wait, else a pause. */
  private worstOf(settled: readonly PromiseSettledResult<unknown>[]): unknown {
    const reasons = settled.filter((s): s is PromiseRejectedResult => s.status === 'rejected').map((s) => s.reason as unknown);
    if (reasons.length === 0) return undefined;
    return (
      reasons.find(isRealFailure) ??
      reasons.find((r) => r instanceof WaitSuspended || r instanceof ChildWaiting) ??
      reasons.find((r) => r instanceof StepAbandoned) ??
      reasons.find((r) => r instanceof NotRecorded) ??
      reasons[0]
    );
  }

  /** Before starting anything new: stop on a pause or a sibling's failure; a read-only replay stops here. */
  private checkGo(scope: Scope): void {
    if (!this.live) throw new NotRecorded();
    const { stop } = this.input;
    if (stop.aborted) {
      if (stop.reason instanceof PauseRequest) throw new StepAbandoned();
      throw stop.reason;
    }
    if (scope.halt.halted) throw new Halted();
  }

  private select<T>(fn: () => unknown, at: string, what: string, ok: (value: unknown) => boolean): T {
    let value: unknown;
    try {
      value = fn();
    } catch (error) {
      throw new SelectorError(this.input.runId, at, what, error);
    }
    if (!ok(value)) throw new SelectorError(this.input.runId, at, `${what} returned ${describeValue(value)}, which is not what it must return`);
    return value as T;
  }

  private decisionAt(path: string): unknown {
    const row = this.take(path);
    return row ? deserialize<Decision>(row.output).value : undefined;
  }

  private async recordDecision(path: string, value: unknown, agentIndex: number): Promise<void> {
    const { runId } = this.input;
    const output = serialize({ value }, { runId, step: path, what: 'decision' });
    const row = await this.append(
      (sequence, prev) => ({
        ...systemRow(runId, sequence, 'decision', output, null, this.clock!.now(), this.input.integrity, { identity: this.input.restored.chain.identity, prev }, path),
      }),
      agentIndex,
      0,
    );
    this.recorded.set(path, row);
  }

  private async recordSkip(agentPlan: AgentPlan, step: StepPlan, path: string): Promise<void> {
    const { runId } = this.input;
    const now = this.clock!.now();
    const row = await this.append(
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

  /**
   * Appends one row. Sequence and chain are taken in order, one write at a time; rows that become ready
   * while a write is in flight leave together in the next one (`appendRun`: one statement and one commit
   * on SQL), so twenty items ending at once do not queue for twenty commits. Each row is fenced by the
   * run's lease. A step with an open transaction commits its row inside it, alone.
   */
  private append(
    build: (sequence: number, prev: string) => StepRecord,
    cursorAgent: number,
    cursorStep: number,
    transaction?: { commit(append: StepAppend): Promise<void> },
  ): Promise<StepRecord> {
    return new Promise<StepRecord>((resolve, reject) => {
      this.waiting.push({ build, cursorAgent, cursorStep, transaction, resolve, reject });
      if (!this.writing) void this.drain();
    });
  }

  private readonly waiting: PendingAppend[] = [];
  private writing = false;

  private async drain(): Promise<void> {
    this.writing = true;
    try {
      while (this.waiting.length > 0) {
        const batch = takeBatch(this.waiting);
        const appends: StepAppend[] = [];
        let sequence = this.sequence;
        let prev = this.prev;
        try {
          for (const pending of batch) {
            const record = pending.build(sequence + 1, prev);
            appends.push({
              step: record,
              run: { cursorAgent: Math.max(0, pending.cursorAgent), cursorStep: pending.cursorStep, status: 'running', resumeHint: null },
              fence: this.input.fence,
            });
            sequence = record.sequence;
            prev = record.sha256;
          }
          const only = batch[0];
          if (only.transaction) await only.transaction.commit(appends[0]);
          else if (appends.length === 1) await this.store!.appendStep(appends[0]);
          else await this.store!.appendRun(appends);
        } catch (error) {
          batch.forEach((pending) => pending.reject(error));
          continue;
        }
        this.sequence = sequence;
        this.prev = prev;
        batch.forEach((pending, i) => pending.resolve(appends[i].step));
      }
    } finally {
      this.writing = false;
    }
  }
}

interface PendingAppend {
  build: (sequence: number, prev: string) => StepRecord;
  cursorAgent: number;
  cursorStep: number;
  transaction?: { commit(append: StepAppend): Promise<void> };
  resolve: (record: StepRecord) => void;
  reject: (error: unknown) => void;
}

/** The rows that can leave together: a row committed in a step's transaction leaves alone. */
function takeBatch(waiting: PendingAppend[]): PendingAppend[] {
  if (waiting[0].transaction) return waiting.splice(0, 1);
  const end = waiting.findIndex((pending) => pending.transaction);
  return waiting.splice(0, end === -1 ? Math.min(waiting.length, 64) : Math.min(end, 64));
}

/** A child run is waiting for a signal: the parent waits too. */
class ChildWaiting extends Error {}

function isRealFailure(reason: unknown): boolean {
  return !(reason instanceof StepAbandoned || reason instanceof Halted || reason instanceof WaitSuspended || reason instanceof ChildWaiting || reason instanceof NotRecorded);
}

/** What `state[into][i]` holds for a child run that failed or was cancelled under `onItemError: 'collect'`. */
export function itemError(error: unknown, runId: string, status: 'failed' | 'cancelled', itemIndex: number): Record<string, unknown> {
  const code = error instanceof WaypointError ? error.code : typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'ERROR';
  const message = error instanceof Error ? error.message : typeof error === 'object' && error !== null && 'message' in error ? String(error.message) : String(error);
  return { error: { code, message }, runId, status, itemIndex };
}

function isPlainObject(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function describeValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  try {
    const text = JSON.stringify(value);
    return text.length > 60 ? `${text.slice(0, 60)}...` : text;
  } catch {
    return typeof value;
  }
}

/** A row's path: its own, or `agentId/stepName` for a step of a straight line (and rows of earlier releases). */
export function pathOf(row: StepRecord): string {
  // A system row without a path (a base or patch row) keys by its sequence: it is never a step or decision.
  return row.agentId === SYSTEM_AGENT && !row.path ? `${SYSTEM_AGENT}/${row.stepName}/${row.sequence}` : rowPath(row);
}
