import type { StepRecord } from '../../contract/checkpoint-store';
import { FlowInterpreter } from './flow-executor';
import { NotRecorded, type BoundarySnapshot, type ChildStateReader, type RootBoundary, type Scope } from './flow-scope';
import { itemPlanOf } from './fan-out';
import { JOIN } from './join-rows';
import type { ForEachNode } from '../plan/flow-plan';
import type { ExecutionInput, FlowStart } from '../run/execution';
import { StateFrame } from '../state/state-frame';
import type { SharedState } from '../state/state-schema';

/**
 * A read-only replay: the interpreter (flow-executor.ts) given only the plan and the rows. It has no store,
 * clock, telemetry or step runner, so it cannot write or run anything: it rebuilds the state from the rows
 * and stops each branch at its first unrecorded step or decision. It keeps the trail retention reads at
 * every top-level boundary (the rows taken, the steps completed).
 *
 * @example
 * const state = await new FlowReplay({ plan, runId, restored }).replay();
 */
export class FlowReplay extends FlowInterpreter {
  /** Sequences of the rows taken so far and paths of the steps completed so far (the boundaries report them). */
  private readonly consumed = new Set<number>();
  private lastConsumed = 0;
  private readonly taken = new Set<string>();
  private readonly completedPaths: string[] = [];

  constructor(
    input: ExecutionInput,
    /** Reads a child run's state (a forEach over a `@Pipeline` class, or a distributed item's hidden child run). */
    private readonly childState?: ChildStateReader,
    /** Told of every top-level boundary the replay passes (retention chooses where to fold). */
    private readonly onBoundary?: (boundary: RootBoundary) => void,
  ) {
    super(input);
  }

  /** The state the recorded rows give (each branch up to its first unrecorded step). */
  async replay(): Promise<SharedState> {
    const frame = new StateFrame(this.input.restored.state, this.input.plan.reducers, false);
    try {
      await this.walk(frame);
    } catch (error) {
      if (!(error instanceof NotRecorded)) throw error;
    }
    return frame.view;
  }

  protected override take(path: string): StepRecord | undefined {
    const row = this.recorded.get(path);
    if (row) {
      this.consume(row);
      this.taken.add(path);
    }
    return row;
  }

  protected override patched(row: StepRecord): void {
    this.consume(row);
  }

  protected override reached(path: string): void {
    this.completedPaths.push(path);
  }

  private consume(row: StepRecord): void {
    this.consumed.add(row.sequence);
    if (row.sequence > this.lastConsumed) this.lastConsumed = row.sequence;
  }

  /** The first decision with no row: the replay ends this branch here. */
  protected override decide<T>(): Promise<T> {
    throw new NotRecorded();
  }

  /** A replay writes nothing: a missing merge row leaves the merged values in the state as the step's row gave them. */
  protected override unrecordedRow(): void {}

  protected override boundaryDue(): boolean {
    return this.onBoundary !== undefined;
  }

  protected override boundary(frame: StateFrame, at: FlowStart): void {
    this.onBoundary?.({
      ...at,
      consumed: this.consumed,
      lastConsumed: this.lastConsumed,
      snapshot: () => this.snapshotAt(frame),
    });
  }

  /**
   * The state, memories and paths here, kept as they are while the replay goes on, at the cost of the
   * state's top-level keys and the memories: a frame's values are frozen as they are merged, so a copy of
   * its keys is the state at this point; the paths taken and completed only grow, so their counts here
   * are enough to read them later. The keys are still paid per call: taking one at every boundary of a
   * replay made choosing a boundary 8x slower for a state of 2,000 keys (baseAtBoundary takes one).
   */
  private snapshotAt(frame: StateFrame): BoundarySnapshot {
    const takenCount = this.taken.size;
    const completedCount = this.completedPaths.length;
    let taken: ReadonlySet<string> | undefined;
    const taking = this.taken;
    const completedPaths = this.completedPaths;
    return {
      state: { ...frame.view },
      memories: new Map(this.memories),
      get taken() {
        taken ??= new Set([...taking].slice(0, takenCount));
        return taken;
      },
      get completed() {
        return completedPaths.slice(0, completedCount);
      },
    };
  }

  /** A construct whose parts are done but whose join row is not recorded is not joined yet: the replay stops there. */
  protected override joinable(at: string): void {
    if (!this.recorded.has(`${at}${JOIN}`)) throw new NotRecorded();
  }

  /** The replay shows the state the failed loop kept. */
  protected override loopLimit(): never {
    throw new NotRecorded();
  }

  /** A replay runs nothing elsewhere: items sent to the fleet are read from their child runs. */
  protected override fanOutItems(): undefined {
    return undefined;
  }

  /** A replay checks nothing: its rows were checked when they were recorded. */
  protected override collected(): void {}

  /** A run whose items went to the fleet: the item's hidden child run holds its records. */
  protected override itemElsewhere(node: ForEachNode, scope: Scope, index: number): Promise<Record<string, unknown> | null> | null {
    if (!this.childState) return null;
    return this.childState(itemPlanOf(this.input.plan, node), `${this.input.runId}/${scope.path}${node.into}/${index}`);
  }

  protected override async child(node: ForEachNode, scope: Scope, _at: string, _item: unknown, index: number): Promise<unknown> {
    const runId = `${this.input.runId}/${scope.path}${node.into}/${index}`;
    const state = this.childState ? await this.childState(node.child!, runId, node.onItemError === 'collect' ? index : undefined) : null;
    if (state === null) throw new NotRecorded();
    return state;
  }
}
