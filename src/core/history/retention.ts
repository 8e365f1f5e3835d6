import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { CheckpointStore, LoadedRun, RunRecord, RunStatus, StepRecord } from '../../contract/checkpoint-store';
import { foldRows, replayFlow, restoreRun } from './checkpoint-manager';
import type { BasePayload, FlowBase } from '../run/execution';
import type { BoundarySnapshot, ChildStateReader, RootBoundary } from '../flow/flow-executor';
import { rowsNeedThePipeline } from './flow-base';
import type { PipelinePlan } from '../plan/plan-types';
import { linkOf, runIdentity, SYSTEM_AGENT, systemRow, verifySteps, type Integrity } from './row-integrity';
import type { Clock } from '../../contract/clock';
import { serialize } from '../state/serializer';
import { deserialize } from '../state/value-decoder';
import type { ArchiveSink, RetentionOptions } from '../../contract/options';

export type { ArchiveSink, RetentionOptions } from '../../contract/options';

/**
 * Built-in sink: one gzip JSON-lines file per run (`<dir>/<runId>.jsonl.gz`), one row per line. Each
 * call appends a gzip member (concatenated members are one valid gzip stream) and fsyncs it.
 *
 * @example
 * const sink = new GzipFileArchiveSink('./archive');
 */
export class GzipFileArchiveSink implements ArchiveSink {
  constructor(readonly directory: string) {}

  fileFor(runId: string): string {
    return join(this.directory, `${encodeURIComponent(runId)}.jsonl.gz`);
  }

  async archive(runId: string, rows: readonly StepRecord[]): Promise<void> {
    if (rows.length === 0) return;
    await mkdir(this.directory, { recursive: true });
    const body = await promisify(gzip)(rows.map((row) => JSON.stringify(row)).join('\n') + '\n');
    const file = await open(this.fileFor(runId), 'a');
    try {
      await file.write(body);
      await file.sync();
    } finally {
      await file.close();
    }
  }
}

/**
 * Keeps stored runs bounded without losing the ability to resume: the oldest step rows of a run are
 * folded into one base snapshot row (state, memories, completed steps), archived, then deleted in one
 * store operation. The latest `keepLast` rows always stay as they are.
 */
export class RetentionManager {
  readonly keepLast: number;

  constructor(
    private readonly store: CheckpointStore,
    private readonly clock: Clock,
    private readonly integrity: Integrity,
    readonly options: RetentionOptions = {},
  ) {
    this.keepLast = Math.max(1, options.keepLast ?? 10);
  }

  /**
   * Folds all but the newest `keepLast` rows of a run; returns how many rows were folded. A run with
   * control flow needs its pipeline's plan (`options.plan`, of the run's version): its rows fold only up to
   * a top-level boundary (see `compactFlow`); without the plan such a run is left as it is (0).
   */
  async compact(runId: string, options: { plan?: PipelinePlan; childState?: ChildStateReader } = {}): Promise<number> {
    const loaded = await this.store.loadRun(runId);
    if (!loaded || loaded.steps.length <= this.keepLast + 1) return 0;
    const { run, steps } = loaded;
    verifySteps(run, steps, this.integrity);
    if (options.plan) return options.plan.version === run.pipelineVersion ? this.compactAtBoundary(loaded, options.plan, options.childState) : 0;
    // Without the pipeline only a straight line of an earlier shape can be folded: its rows merge in order.
    return rowsNeedThePipeline(steps) ? 0 : this.compactLine(loaded);
  }

  /** Folds a straight line's oldest rows in order, without its pipeline (the CLI's compaction of any run). */
  private async compactLine(loaded: LoadedRun): Promise<number> {
    const { run, steps } = loaded;
    const folded = steps.slice(0, steps.length - this.keepLast);
    const last = folded[folded.length - 1];
    const state = foldRows(deserialize<Record<string, unknown>>(run.input), run.pipelineVersion, folded);
    const payload: BasePayload = { state: state.state, completed: state.completed, version: state.version, replaces: linkOf(last) };
    await this.writeBase(run, folded, payload, state.memories, undefined);
    return folded.length;
  }

  /**
   * Folds at a top-level boundary: after a whole entry of the pipeline's top level, between two steps of a
   * top-level agent, or after an iteration of a top-level loop, where nothing before is in flight. The
   * replay reports every boundary with the rows it took to reach it; the latest boundary whose rows are
   * exactly a prefix of the run's rows, leaving at least `keepLast` rows, is folded into a base row holding
   * the state and memories there (and what an earlier base carried past it). Work inside a construct in
   * flight is never folded. A first replay chooses the boundary, a second takes its snapshot, so a long run
   * costs two replays, not a copy of the state per boundary.
   */
  private async compactAtBoundary(loaded: LoadedRun, plan: PipelinePlan, childState?: ChildStateReader): Promise<number> {
    const { run, steps } = loaded;
    const limit = steps[steps.length - 1 - this.keepLast].sequence;
    const previous = steps[0].agentId === SYSTEM_AGENT && steps[0].stepName === 'base' ? steps[0] : undefined;
    const offset = previous ? 1 : 0;
    let chosen: { index: number; count: number } | undefined;
    let index = 0;
    await this.replay(plan, loaded, childState, (boundary) => {
      const rows = boundary.consumed.size - (previous && boundary.consumed.has(previous.sequence) ? 1 : 0);
      // The rows taken are exactly the oldest ones after the previous base: their highest sequence is the n-th row's.
      const prefix = rows > 0 && boundary.lastConsumed <= limit && steps[offset + rows - 1]?.sequence === boundary.lastConsumed;
      if (prefix && (!chosen || offset + rows > chosen.count)) chosen = { index, count: offset + rows };
      index += 1;
    });
    if (!chosen) return 0;
    const at = chosen.index;
    let boundary: (RootBoundary & BoundarySnapshot) | undefined;
    index = 0;
    await this.replay(plan, loaded, childState, (b) => {
      if (index++ === at) boundary = { ...b, ...b.snapshot() };
    });
    const folded = steps.slice(0, chosen.count);
    const last = folded[folded.length - 1];
    // What an earlier base carried and the replay did not take before this boundary is carried on.
    const before = previous ? deserialize<BasePayload>(previous.output) : undefined;
    const carried = (before?.flow?.carried ?? []).filter((entry) => !boundary!.taken.has(entry.path));
    const flow: FlowBase = { done: boundary!.done, doneKeys: boundary!.doneKeys, carried };
    if (boundary!.iterations !== undefined) flow.iterations = boundary!.iterations;
    const completed = [...new Set([...(before?.completed ?? []), ...boundary!.completed])];
    const payload: BasePayload = { state: boundary!.state, completed, version: run.pipelineVersion, replaces: linkOf(last), flow };
    await this.writeBase(run, folded, payload, boundary!.memories, previous);
    return folded.length;
  }

  private async replay(plan: PipelinePlan, loaded: LoadedRun, childState: ChildStateReader | undefined, onBoundary: (boundary: RootBoundary) => void): Promise<void> {
    const restored = await restoreRun(plan, loaded, this.integrity);
    await replayFlow(plan, loaded.run, restored, childState, onBoundary);
  }

  /** Writes the base row that replaces `folded` (archived first; an earlier base row is not archived again). */
  private async writeBase(run: RunRecord, folded: readonly StepRecord[], payload: BasePayload, memories: Map<string, string>, previous: StepRecord | undefined): Promise<void> {
    const last = folded[folded.length - 1];
    const base = systemRow(
      run.runId,
      last.sequence,
      'base',
      // The row after the fold stays chained to the last folded row: the base names that row's digest.
      serialize(payload, { runId: run.runId, what: 'base snapshot', wrapping: 1 }),
      serialize(Object.fromEntries(memories)),
      this.clock.now(),
      this.integrity,
      { identity: runIdentity(run), prev: '' },
    );
    const isBase = previous !== undefined && previous.agentId === SYSTEM_AGENT && previous.stepName === 'base';
    await this.options.archive?.archive(run.runId, isBase ? folded.slice(1) : folded);
    await this.store.compactSteps(run.runId, base);
  }

  /** Deletes finished runs (archiving their rows first) last updated before `olderThan`; returns their ids. */
  async prune(olderThan: Date, statuses: RunStatus[] = ['completed', 'cancelled', 'failed']): Promise<string[]> {
    const pruned: string[] = [];
    for (const run of await this.store.listRuns({ status: statuses })) {
      if (run.updatedAt >= olderThan) continue;
      if (this.options.archive) await this.options.archive.archive(run.runId, await this.store.listSteps(run.runId));
      await this.store.deleteRun(run.runId);
      pruned.push(run.runId);
    }
    return pruned;
  }
}
