import { describeError, WaypointError } from '../../contract/errors';
import { ItemFailedError, LoopLimitError, ParallelConflictError, UnknownBranchError } from './flow-errors';
import type { BranchNode, FlowNode, ForEachNode, LoopNode, ParallelNode, AgentNode } from '../plan/flow-plan';
import { PauseRequest, StepAbandoned, type ExecutionOutcome, type FlowStart } from '../run/execution';
import { entryKey, rootEntries } from '../history/flow-base';
import { ChildWaiting, Halt, Halted, isPlainObject, isRealFailure, itemError, NotRecorded, UNTIL, type Decision, type Scope } from './flow-scope';
import { FlowSteps } from './flow-steps';
import { resumeHintFor } from '../run/run-status';
import { serialize } from '../state/serializer';
import { defineData, deserialize } from '../state/value-decoder';
import { JOIN } from './join-rows';
import { StateFrame } from '../state/state-frame';
import { validateUpdate, type SharedState } from '../state/state-schema';
import { WaitSuspended } from '../step/durable-waits';
import { itemPlanOf } from './fan-out';

export { itemError, pathOf, type BoundarySnapshot, type ChildStateReader, type RootBoundary } from './flow-scope';

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
export class FlowExecution extends FlowSteps {
  /** The sequence when retention last ran (the restored one at the start). */
  private compactedAt = this.input.restored.lastSequence;

  /** Runs the tree to its end (or a pause, a wait, a failure) and closes the run when it completes. */
  async run(): Promise<ExecutionOutcome> {
    const { plan, stop } = this.input;
    const frame = new StateFrame(this.input.restored.state, plan.reducers, false);
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
        lastSequence: this.queue.sequence,
      });
      if (error instanceof StepAbandoned || error instanceof Halted) {
        if (stop.aborted && !(stop.reason instanceof PauseRequest)) throw stop.reason;
        return outcome('paused', error instanceof StepAbandoned ? error.message || undefined : undefined);
      }
      if (error instanceof WaitSuspended) return outcome('waiting', `${error.step ? `in step '${error.step}' ` : ''}for signal '${error.signalName}'`);
      if (error instanceof ChildWaiting) return outcome('waiting', error.message);
      throw error;
    }
    // The run is closed by the row of its last step when the pipeline ends with one; else (it ends with a
    // construct, or its last row was recorded earlier) by a write of its own.
    if (this.live && !this.closedByRow) {
      await this.store!.updateRun(this.input.runId, { status: 'completed', resumeHint: resumeHintFor(this.input.runId, 'completed') }, this.input.fence);
    }
    return { status: 'completed', state: frame.view, stepsExecuted: this.executed, stepsReused: this.reused, lastSequence: this.queue.sequence, closed: this.live };
  }

  /** Read-only replay: the state the recorded rows give (each branch up to its first unrecorded step). */
  async replay(): Promise<SharedState> {
    const frame = new StateFrame(this.input.restored.state, this.input.plan.reducers, false);
    try {
      await this.root({ path: '', memory: '', halt: new Halt(), item: this.input.item?.value, itemIndex: this.input.item?.index }, frame);
    } catch (error) {
      if (!(error instanceof NotRecorded)) throw error;
    }
    return frame.view;
  }

  /**
   * The top level: its entries in order from where the base row (if any) left off. After each entry, after
   * each step of a top-level agent, and after each iteration of a top-level loop, nothing before is in
   * flight: a read-only replay reports the point to retention there, a live run lets retention fold what
   * lies before it.
   */
  private async root(scope: Scope, frame: StateFrame): Promise<void> {
    const entries = rootEntries(this.input.plan);
    const start = this.input.restored.flowStart;
    const keys = entries.map(entryKey);
    for (let done = start?.done ?? 0; done < entries.length; done++) {
      const entry = entries[done];
      const boundary = (iterations?: number) => this.boundary(frame, { done, doneKeys: keys.slice(0, done), iterations });
      if (entry.kind === 'loop') await this.loop(entry, scope, frame, done === start?.done ? (start.iterations ?? 0) : 0, (n) => boundary(n));
      else if (entry.kind === 'agent') await this.topLevelAgent(entry, scope, frame, () => boundary());
      else await this.node(entry, scope, frame);
      await this.boundary(frame, { done: done + 1, doneKeys: keys.slice(0, done + 1) });
    }
  }

  /** A top-level agent's steps, with a boundary between two of them (a base row may fold part of the agent). */
  private async topLevelAgent(node: AgentNode, scope: Scope, frame: StateFrame, between: () => Promise<void>): Promise<void> {
    const steps = node.agent.steps;
    for (let i = 0; i < steps.length; i++) {
      await this.step(node.agent, steps[i], scope, frame);
      if (i < steps.length - 1) await between();
    }
  }

  private async boundary(frame: StateFrame, at: FlowStart): Promise<void> {
    if (!this.live) {
      this.onBoundary?.({
        ...at,
        consumed: this.consumed,
        lastConsumed: this.lastConsumed,
        snapshot: () => ({
          state: deserialize<Record<string, unknown>>(serialize({ ...frame.view }, { runId: this.input.runId, what: 'state at a top-level boundary' })),
          memories: new Map(this.memories),
          taken: new Set(this.taken),
          completed: [...this.completedPaths],
        }),
      });
      return;
    }
    // Retention folds once `every` more rows were written since it last ran (or since the run started here).
    const compaction = this.input.compaction;
    if (!compaction || Math.floor(this.queue.sequence / compaction.every) <= Math.floor(this.compactedAt / compaction.every)) return;
    this.compactedAt = this.queue.sequence;
    try {
      await compaction.compact(this.input.runId);
    } catch (error) {
      // Retention must never fail a run: a failed compaction leaves more rows behind, nothing else.
      this.input.logger.warn('compaction failed; rows are kept', { sequence: this.queue.sequence, error: describeError(error) });
    }
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
    // A run that records its joins shows a construct in the enclosing state only once it has joined (its join row).
    // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows the worst branch's own rejection reason unchanged
    if (incomplete && this.input.restored.joins) throw incomplete;
    this.joinRecorded(`${scope.path}${node.label}`);
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
    await this.joined(`${scope.path}${node.label}`, setBy.keys(), frame);
  }

  /** A replay of a run that records its joins stops at a construct whose join row is not recorded: its parts are done, its join is not. */
  private joinRecorded(at: string): void {
    if (this.input.restored.joins && !this.live && !this.recorded.has(`${at}${JOIN}`)) throw new NotRecorded();
  }

  /**
   * After a construct joined into `frame`: its join row, the values of the properties it changed as the
   * join left them (core/flow/join-rows.ts). A replay takes it; a live run writes it unless it is recorded.
   */
  private async joined(at: string, keys: Iterable<string>, frame: StateFrame): Promise<void> {
    if (!this.input.restored.joins || this.take(`${at}${JOIN}`) || !this.live) return;
    const values: Record<string, unknown> = {};
    for (const key of keys) defineData(values, key, frame.view[key]);
    await this.recordSystem('join', `${at}${JOIN}`, serialize(values, { runId: this.input.runId, step: at, what: `join of '${at}'` }), -1);
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
    // A distributed forEach some of whose items already ran in a process without a fleet (rows under this
    // run) stays in process: a child run for such an item would run its steps again.
    if ((node.child || node.distributed) && this.live && this.input.fanOut && !(node.distributed && this.itemsRanHere(at))) return this.fanOutItems(node, scope, frame, at, list);
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
    if (incomplete && this.input.restored.joins) throw new NotRecorded();
    this.joinRecorded(at);
    const update = { [node.into]: results };
    if (this.live && this.input.validateEveryStep) validateUpdate(this.input.plan.state, update, { runId: this.input.runId, step: at, phase: 'collected by forEach' });
    frame.apply(update);
    if (incomplete) throw new NotRecorded();
    await this.joined(at, [node.into], frame);
  }

  /** True when an item of the forEach at `at` recorded rows in this run (it ran in process, not as a child run). */
  private itemsRanHere(at: string): boolean {
    const prefix = `${at}[`;
    for (const path of this.recorded.keys()) if (path.startsWith(prefix)) return true;
    return false;
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
    await this.joined(at, [node.into], frame);
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
}
