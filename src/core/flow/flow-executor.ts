import { WaypointError } from '../../contract/errors';
import { ItemFailedError, ParallelConflictError, UnknownBranchError } from './flow-errors';
import type { BranchNode, FlowNode, ForEachNode, LoopNode, ParallelNode } from '../plan/flow-plan';
import type { AgentPlan } from '../plan/plan-reader';
import { StepAbandoned, type FlowStart } from '../run/execution';
import { entryKey, rootEntries } from '../history/flow-base';
import { ChildWaiting, Halt, isRealFailure, NotRecorded, UNTIL, type Decision, type Scope } from './flow-scope';
import { FlowSteps } from './flow-steps';
import { serialize } from '../state/serializer';
import { defineData, deserialize } from '../state/value-decoder';
import { JOIN } from './join-rows';
import { StateFrame } from '../state/state-frame';
import { WaitSuspended } from '../step/durable-waits';

export { itemError, pathOf, type BoundarySnapshot, type ChildStateReader, type RootBoundary } from './flow-scope';

/** Runs at a top-level agent's boundary between two steps, given how many of its steps came before it. */
export type Between = (stepsDone: number) => Promise<void> | void;

/**
 * The interpreter every pipeline runs on, written once for both of its kinds: it walks the plan's tree and
 * looks every step and decision up by its path in the recorded rows first. A recorded step's output is
 * applied without running it, a recorded decision is followed without asking its selector again. What is
 * not recorded (a step, a decision, a join, a child run) is the subclass's: a live execution
 * (live-execution.ts) runs it and records it the moment it ends; a read-only replay (flow-replay.ts), which
 * has no store, clock or step runner, stops that branch there.
 */
export abstract class FlowInterpreter extends FlowSteps {
  /** A decision (a branch's case, a loop's check, a forEach's items) not recorded: a live execution asks `ask` and records its answer; a replay stops. */
  protected abstract decide<T>(path: string, scope: Scope, ask: () => T): Promise<T>;

  /** A point of the top level with nothing in flight before it: a live execution lets retention fold there; a replay reports it to retention. */
  protected abstract boundary(frame: StateFrame, at: FlowStart): Promise<void> | void;
  /**
   * True when `boundary` has something to do at the next top-level point (a replay's report, a due compaction).
   * `last`: the point after the run's last top-level entry, where the run ends.
   */
  protected abstract boundaryDue(last?: boolean): boolean;

  /** Before a construct of a run that records its joins is joined: a replay stops unless its join row is recorded. */
  protected abstract joinable(at: string): void;

  /** A loop at `maxIterations` whose check never said done: a live run fails, a replay shows the state the failed loop kept. */
  protected abstract loopLimit(at: string, node: LoopNode): never;

  /** The forEach's items run elsewhere (a fleet's child runs) when this execution can send them there; undefined when they run here. */
  protected abstract fanOutItems(node: ForEachNode, scope: Scope, frame: StateFrame, at: string, list: unknown[]): Promise<void> | undefined;

  /** What a forEach collected, checked before it is merged (a replay checks nothing: its rows were checked when recorded). */
  protected abstract collected(update: Record<string, unknown>, at: string): void;

  /** An item of a distributed forEach taken from its hidden child run (its changes), or null when the item runs here. */
  protected abstract itemElsewhere(node: ForEachNode, scope: Scope, index: number, halt: Halt): Promise<Record<string, unknown> | null> | null;

  /** An item of a forEach over a `@Pipeline` class: its child run's state (or collected error). */
  protected abstract child(node: ForEachNode, scope: Scope, at: string, item: unknown, index: number, halt: Halt): Promise<unknown>;

  /** Walks the tree from the top, into `frame`, from where the restored rows leave it. */
  protected walk(frame: StateFrame): Promise<void> {
    return this.root({ path: '', memory: '', halt: new Halt(), item: this.input.item?.value, itemIndex: this.input.item?.index }, frame);
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
      // Only a due boundary builds its point: a live run without retention passes one per step for nothing.
      const boundary = (at: Pick<FlowStart, 'iterations' | 'steps'>) => (this.boundaryDue() ? this.boundary(frame, { done, doneKeys: keys.slice(0, done), ...at }) : undefined);
      const resumed = done === start?.done;
      if (entry.kind === 'loop') await this.loop(entry, scope, frame, resumed ? (start.iterations ?? 0) : 0, (iterations) => boundary({ iterations }));
      else if (entry.kind === 'agent') await this.agentSteps(entry.agent, scope, frame, (steps) => boundary({ steps }), resumed ? start.steps : undefined);
      else await this.node(entry, scope, frame);
      if (this.boundaryDue(done + 1 === entries.length)) await this.boundary(frame, { done: done + 1, doneKeys: keys.slice(0, done + 1) });
    }
  }

  /**
   * An agent's steps in order; at the top level `between` runs between two of them (a boundary: a base row
   * may fold part of the agent; `folded` of its steps when the run's base was taken there). A live execution
   * walks them itself (it runs what is not recorded).
   */
  protected async agentSteps(agentPlan: AgentPlan, scope: Scope, frame: StateFrame, between?: Between, _folded?: number): Promise<void> {
    const steps = agentPlan.steps;
    for (let i = 0; i < steps.length; i++) {
      const pending = this.step(agentPlan, steps[i], scope, frame);
      if (pending) await pending;
      if (between && i < steps.length - 1 && this.boundaryDue()) await between(i + 1);
    }
  }

  private async node(node: FlowNode, scope: Scope, frame: StateFrame): Promise<void> {
    switch (node.kind) {
      case 'agent':
        return this.agentSteps(node.agent, scope, frame);
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

  private async parallel(node: ParallelNode, scope: Scope, frame: StateFrame): Promise<void> {
    const halt = new Halt(scope.halt);
    const frames = node.branches.map(() => frame.fork());
    const settled = await Promise.allSettled(
      node.branches.map(async (branch, i) => {
        try {
          if (this.input.crash !== undefined) this.input.crash({ kind: 'before-branch', step: `${scope.path}${node.label}[${i}]`, runId: this.input.runId });
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
    if (this.input.restored.joins) this.joinable(`${scope.path}${node.label}`);
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

  /**
   * After a construct joined into `frame`: its join row, the values of the properties it changed as the
   * join left them (core/flow/join-rows.ts). A replay takes it; a live run writes it unless it is recorded.
   */
  protected async joined(at: string, keys: Iterable<string>, frame: StateFrame): Promise<void> {
    if (!this.input.restored.joins || this.take(`${at}${JOIN}`)) return;
    const values: Record<string, unknown> = {};
    for (const key of keys) defineData(values, key, frame.view[key]);
    await this.unrecordedRow('join', at, values, `join of '${at}'`, -1);
  }

  private async loop(node: LoopNode, scope: Scope, frame: StateFrame, from = 0, afterIteration?: (iterations: number) => Promise<void> | void): Promise<void> {
    const at = `${scope.path}${node.label}`;
    for (let iteration = from; ; iteration++) {
      if (iteration >= node.maxIterations) this.loopLimit(at, node);
      await this.node(node.body, { ...scope, path: `${at}[${iteration}]/`, memory: `${scope.memory}${node.label}/`, iteration }, frame);
      const decisionPath = `${at}[${iteration}]${UNTIL}`;
      let done = this.decisionAt(decisionPath) as boolean | undefined;
      if (done === undefined)
        done = await this.decide(decisionPath, scope, () =>
          this.select<boolean>(
            () => node.until(frame.view),
            at,
            'until condition',
            (v) => typeof v === 'boolean',
          ),
        );
      if (done) return;
      await afterIteration?.(iteration + 1);
    }
  }

  private async branch(node: BranchNode, scope: Scope, frame: StateFrame): Promise<void> {
    const at = `${scope.path}${node.label}`;
    let key = this.decisionAt(at) as string | undefined;
    if (key === undefined)
      key = await this.decide(at, scope, () => {
        const chosen = this.select<string>(
          () => node.select(frame.view),
          at,
          'selector',
          (v) => typeof v === 'string',
        );
        if (!node.cases.has(chosen)) throw new UnknownBranchError(this.input.runId, at, chosen, [...node.cases.keys()]);
        return chosen;
      });
    const chosen: string = key;
    const body = node.cases.get(chosen);
    if (!body) throw new UnknownBranchError(this.input.runId, at, chosen, [...node.cases.keys()]);
    await this.node(body, { ...scope, path: `${at}[${chosen}]/`, memory: `${scope.memory}${node.label}[${chosen}]/` }, frame);
  }

  private async forEach(node: ForEachNode, scope: Scope, frame: StateFrame): Promise<void> {
    const at = `${scope.path}${node.label}`;
    let items = this.decisionAt(at) as unknown[] | undefined;
    if (items === undefined)
      items = await this.decide(at, scope, () => {
        const listed = this.select<unknown[]>(
          () => node.items(frame.view),
          at,
          'item selector',
          (v) => Array.isArray(v),
        );
        // The list is recorded as decoded, so items are what a resumed run would read back.
        return deserialize<Decision>(serialize({ value: listed }, { runId: this.input.runId, step: at, what: `item list of '${at}'` })).value as unknown[];
      });
    const list = items;
    const elsewhere = node.child || node.distributed ? this.fanOutItems(node, scope, frame, at, list) : undefined;
    if (elsewhere) return elsewhere;
    const results: unknown[] = new Array(list.length);
    const halt = new Halt(scope.halt);
    const failures: { index: number; error: unknown }[] = [];
    let incomplete = false;
    let next = 0;
    const worker = async () => {
      while (next < list.length && !halt.halted) {
        const index = next++;
        try {
          if (this.input.crash !== undefined) this.input.crash({ kind: 'before-item', step: `${at}[${index}]`, runId: this.input.runId });
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
    if (this.input.restored.joins) this.joinable(at);
    const update = { [node.into]: results };
    this.collected(update, at);
    frame.apply(update);
    if (incomplete) throw new NotRecorded();
    await this.joined(at, [node.into], frame);
  }

  /** One item: its own frame from the state at the forEach, or a child run; returns what lands in `state[into][i]`. */
  private async item(node: ForEachNode, scope: Scope, frame: StateFrame, item: unknown, index: number, halt: Halt): Promise<unknown> {
    const at = `${scope.path}${node.label}`;
    if (node.child) return this.child(node, scope, at, item, index, halt);
    if (node.distributed) {
      const changes = await this.itemElsewhere(node, scope, index, halt);
      if (changes !== null) return changes;
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

  /** Of several outcomes, what the whole should end with: a failure, else a stop, else a wait, else a pause. */
  protected worstOf(settled: readonly PromiseSettledResult<unknown>[]): unknown {
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
