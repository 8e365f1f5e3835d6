import type { StepRecord } from '../../contract/checkpoint-store';
import { SelectorError } from './flow-errors';
import { describeValue, NotRecorded, pathOf, PATCH, WHEN, type Decision, type Scope } from './flow-scope';
import type { AgentPlan, StepPlan } from '../plan/plan-reader';
import { SYSTEM_AGENT } from '../history/row-integrity';
import type { ExecutionInput } from '../run/execution';
import { defineData, deserialize } from '../state/value-decoder';
import { MERGE, mergeRowValues } from './join-rows';
import type { RowCursor } from './append-queue';
import type { StateFrame } from '../state/state-frame';

/** What `taken` gives for a step that has no row and was not folded: it must run. */
export const UNRECORDED: unique symbol = Symbol('unrecorded');

/** A step's path in the run: at the top level its key (no string built per step), under a construct the scope's path and the step. */
export function stepPath(step: StepPlan, scope: Scope): string {
  return scope.path === '' ? step.key : `${scope.path}${step.agentId}/${step.name}`;
}

/** The agent instance a step runs on: at the top level the agent's id, under a construct the scope's own instance of it. */
export function stepInstance(step: StepPlan, scope: Scope): string {
  return scope.memory === '' ? step.agentId : `${scope.memory}${step.agentId}`;
}

/**
 * What the interpreter (flow-executor.ts) does at a leaf of its tree, live or replaying: look a step or a
 * decision up by its path in the recorded rows and take it. What is not recorded is the subclass's to
 * handle: a live execution (live-execution.ts) runs and records it, a replay (flow-replay.ts) stops there.
 */
export abstract class FlowSteps {
  protected readonly recorded = new Map<string, StepRecord>();
  protected readonly memories = new Map<string, string>();
  protected reused = 0;

  /** Paths of steps a base row folded (their outputs are in its state) that have no row of their own. */
  private readonly folded: ReadonlySet<string>;
  /** Patch rows with no path (a fork of a straight line): each applies before the first step after it. */
  private readonly loosePatches: StepRecord[] = [];
  /** True when some patch row has a path (a fork's patch before one step of a tree). */
  private readonly pathPatches: boolean;
  /** The pipeline has `@Reducer` properties (a step's update may need a merge row). */
  protected readonly reducing: boolean;

  constructor(protected readonly input: ExecutionInput) {
    let pathPatches = false;
    for (const row of input.restored.rows ?? []) {
      if (row.agentId === SYSTEM_AGENT && row.stepName === 'patch' && !row.path) this.loosePatches.push(row);
      else this.recorded.set(pathOf(row), row);
      if (row.agentId === SYSTEM_AGENT && row.stepName === 'patch' && row.path) pathPatches = true;
    }
    this.pathPatches = pathPatches;
    this.folded = input.restored.folded ?? new Set();
    this.reducing = Object.keys(input.plan.reducers).length > 0;
    // A base row's memories (per agent instance) are where the replay starts; rows after it update them.
    for (const [instance, text] of input.restored.memories) this.memories.set(instance, text);
  }

  /**
   * A step at `path` that has no row and was not folded, met by the default walk of an agent's steps (the
   * interpreter's `agentSteps`): a replay stops there. A live execution walks an agent's steps itself and runs
   * and records such a step in that walk (live-execution.ts).
   */
  protected unrecorded(_path: string): Promise<void> {
    throw new NotRecorded();
  }

  /**
   * The merge row of the step at `at` or the join row of the construct at `at`, not recorded (`values` as the
   * frame holds them): a live execution writes it; a replay has none to write.
   */
  protected abstract unrecordedRow(kind: 'merge' | 'join', at: string, values: Record<string, unknown>, what: string, agentIndex: number, cursor?: RowCursor): Promise<void> | void;

  /** A recorded row by path (a replay notes that it took it). */
  protected take(path: string): StepRecord | undefined {
    return this.recorded.get(path);
  }

  /** A recorded path-less patch applied (a replay notes its sequence; a live run keeps no trail). */
  protected patched(_row: StepRecord): void {}

  /** A step completed before this execution, by its row or by the base row (a replay's boundaries report it; a live run keeps no trail). */
  protected reached(_path: string): void {}

  /**
   * One step of the walk: a recorded row is taken (no promise unless a merge row must be written), an
   * unrecorded step is the subclass's.
   */
  protected step(agentPlan: AgentPlan, step: StepPlan, scope: Scope, frame: StateFrame): Promise<void> | void {
    const path = stepPath(step, scope);
    const taken = this.takeStep(agentPlan, step, path, stepInstance(step, scope), frame);
    return taken === UNRECORDED ? this.unrecorded(path) : taken;
  }

  /**
   * A step taken from the rows when it is recorded (its merge row's promise when one must be written) or
   * folded into the base row; `UNRECORDED` when it has neither and must run.
   */
  protected takeStep(agentPlan: AgentPlan, step: StepPlan, path: string, instance: string, frame: StateFrame): Promise<void> | void | typeof UNRECORDED {
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
      this.reached(path);
      this.reused += 1;
      return;
    }
    return UNRECORDED;
  }

  /**
   * Where a resumed run's current top-level agent starts: after the `folded` steps its base row folded (taken
   * between two of them), so a 20,000-step agent's resume does not pass 20,000 folded steps one by one. They
   * count as reused. Walked from the first step when a fork's patches may apply to one of them, or when the
   * base does not name them as folded.
   */
  protected foldedSteps(agentPlan: AgentPlan, scope: Scope, folded: number | undefined): number {
    if (!folded || folded >= agentPlan.steps.length || this.pathPatches || this.loosePatches.length > 0) return 0;
    if (!this.folded.has(stepPath(agentPlan.steps[folded - 1], scope)) || this.folded.has(stepPath(agentPlan.steps[folded], scope))) return 0;
    this.reused += folded;
    return folded;
  }

  /** A recorded step: its output merged (and its merge row taken), its agent's memory taken, nothing run. */
  private reuse(row: StepRecord, step: StepPlan, path: string, instance: string, frame: StateFrame, agentIndex: number): Promise<void> | void {
    if (step.when) this.take(`${path}${WHEN}`); // the yes that preceded the step's row
    if (row.memory !== null) this.memories.set(instance, row.memory);
    this.reached(path);
    this.reused += 1;
    if (row.status === 'skipped') return;
    const update = deserialize<Record<string, unknown>>(row.output);
    frame.apply(update);
    return this.merged(path, update, frame, agentIndex);
  }

  /** Applies the path-less patches recorded before `row` (before the first unrecorded step when `row` is undefined). */
  private applyLoosePatches(frame: StateFrame, row: StepRecord | undefined): void {
    while (this.loosePatches.length > 0 && (row === undefined || this.loosePatches[0].sequence < row.sequence)) {
      const patch = this.loosePatches.shift()!;
      this.patched(patch);
      frame.apply(deserialize<Record<string, unknown>>(patch.output));
    }
  }

  /**
   * After a step's update reached a `@Reducer` property of the run's own frame: its merge row (the merged
   * values, so a reader needs no reducer; core/flow/join-rows.ts). A replay takes it; a live run writes it when
   * it is missing (also after a crash between the step's row and this one).
   */
  protected merged(path: string, update: Record<string, unknown>, frame: StateFrame, agentIndex: number, after?: RowCursor): Promise<void> | void {
    // Most runs have no reducer: no promise is made for them.
    if (!this.mergesOn(frame)) return;
    return this.mergeRow(path, update, frame, agentIndex, after);
  }

  /** True when steps on `frame` may make merge rows: the run records them, has reducers, and `frame` is its own. */
  private mergesOn(frame: StateFrame): boolean {
    return this.input.restored.joins === true && frame.root && this.reducing;
  }

  /** True when a live step's update makes a merge row: it reaches a `@Reducer` property of the run's own frame. */
  protected mergesAfter(update: Record<string, unknown>, frame: StateFrame): boolean {
    if (!this.mergesOn(frame)) return false;
    const reducers = this.input.plan.reducers;
    for (const key of Object.keys(update)) if (Object.prototype.hasOwnProperty.call(reducers, key)) return true;
    return false;
  }

  /**
   * `after`, the run's cursor after the step (the step's row's): the merge row lands right after that row (a step
   * that just ran), so it keeps that cursor and may record what the reducer added (a reader folds it against
   * the state before that row). A merge row written for a step recorded earlier (missing after a crash, or not
   * carried by a migration) holds whole values.
   */
  private async mergeRow(path: string, update: Record<string, unknown>, frame: StateFrame, agentIndex: number, after?: RowCursor): Promise<void> {
    const reducers = this.input.plan.reducers;
    let merged: Record<string, unknown> | undefined;
    let before: Record<string, unknown> | undefined;
    for (const key of Object.keys(update)) {
      if (!Object.prototype.hasOwnProperty.call(reducers, key)) continue;
      defineData((merged ??= {}), key, frame.view[key]);
      defineData((before ??= {}), key, frame.reducedFrom(key));
    }
    if (!merged || this.take(`${path}${MERGE}`)) return;
    await this.unrecordedRow('merge', path, after ? mergeRowValues(merged, before!, update) : merged, 'merged reducer values', agentIndex, after);
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
}
