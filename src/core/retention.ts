import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { CheckpointStore, LoadedRun, RunStatus, StepRecord } from '../contract/checkpoint-store';
import { foldRows, replayFlow, restoreRun } from './checkpoint-manager';
import type { BasePayload, FlowBase } from './execution';
import type { ChildStateReader, RootBoundary } from './flow-executor';
import { hasControlFlow } from './flow-base';
import type { PipelinePlan } from './plan-types';
import { linkOf, runIdentity, SYSTEM_AGENT, systemRow, verifySteps, type Integrity } from './row-integrity';
import type { Clock } from '../contract/clock';
import { serialize } from './serializer';
import { deserialize } from './value-decoder';
import type { ArchiveSink, RetentionOptions } from '../contract/options';

export type { ArchiveSink, RetentionOptions } from '../contract/options';

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
    if (options.plan?.flow || hasControlFlow(steps)) {
      if (!options.plan?.flow || options.plan.version !== run.pipelineVersion) return 0;
      return this.compactFlow(loaded, options.plan, options.childState);
    }
    const folded = steps.slice(0, steps.length - this.keepLast);
    const last = folded[folded.length - 1];
    const state = foldRows(deserialize<Record<string, unknown>>(run.input), run.pipelineVersion, folded);
    const base = systemRow(
      runId,
      last.sequence,
      'base',
      // The row after the fold stays chained to the last folded row: the base names that row's digest.
      serialize({ state: state.state, completed: state.completed, version: state.version, replaces: linkOf(last) }, { runId, what: 'base snapshot', wrapping: 1 }),
      serialize(Object.fromEntries(state.memories)),
      this.clock.now(),
      this.integrity,
      { identity: runIdentity(run), prev: '' },
    );
    await this.options.archive?.archive(runId, folded);
    await this.store.compactSteps(runId, base);
    return folded.length;
  }

  /**
   * A control-flow run folds at a top-level boundary: after a whole entry of the pipeline's top level, or
   * after an iteration of a top-level loop, where nothing before is in flight. The replay reports every
   * boundary with the rows it took to reach it; the latest boundary whose rows are exactly a prefix of the
   * run's rows, leaving at least `keepLast` rows, is folded into a base row holding the state and memories
   * there (and what an earlier base carried past it). Work inside a construct in flight is never folded.
   */
  private async compactFlow(loaded: LoadedRun, plan: PipelinePlan, childState?: ChildStateReader): Promise<number> {
    const { run, steps } = loaded;
    const restored = await restoreRun(plan, loaded, this.integrity);
    const boundaries: RootBoundary[] = [];
    await replayFlow(plan, run, restored, childState, (boundary) => boundaries.push(boundary));
    const limit = steps[steps.length - 1 - this.keepLast].sequence;
    const previous = steps[0].agentId === SYSTEM_AGENT && steps[0].stepName === 'base' ? steps[0] : undefined;
    let chosen: { boundary: RootBoundary; count: number } | undefined;
    for (const boundary of boundaries) {
      // The rows before the boundary must be exactly the oldest rows (an earlier base row counts as taken).
      let count = 0;
      while (count < steps.length && steps[count].sequence <= limit && (steps[count] === previous || boundary.consumed.has(steps[count].sequence))) count++;
      const taken = [...boundary.consumed].filter((sequence) => sequence !== previous?.sequence);
      if (taken.some((sequence) => sequence > limit) || count < taken.length + (previous ? 1 : 0)) continue;
      if (count > (previous ? 1 : 0) && (!chosen || count > chosen.count)) chosen = { boundary, count };
    }
    if (!chosen) return 0;
    const { boundary, count } = chosen;
    const folded = steps.slice(0, count);
    const last = folded[folded.length - 1];
    // What an earlier base carried and the replay did not take before this boundary is carried on.
    const before = previous ? deserialize<BasePayload>(previous.output) : undefined;
    const carried = (before?.flow?.carried ?? []).filter((entry) => !boundary.taken.has(entry.path));
    const flow: FlowBase = { done: boundary.done, doneKeys: boundary.doneKeys, carried };
    if (boundary.iterations !== undefined) flow.iterations = boundary.iterations;
    const completed = [...new Set([...(before?.completed ?? []), ...boundary.completed])];
    const payload: BasePayload = { state: boundary.state, completed, version: run.pipelineVersion, replaces: linkOf(last), flow };
    const base = systemRow(
      run.runId,
      last.sequence,
      'base',
      serialize(payload, { runId: run.runId, what: 'base snapshot', wrapping: 1 }),
      serialize(Object.fromEntries(boundary.memories)),
      this.clock.now(),
      this.integrity,
      { identity: runIdentity(run), prev: '' },
    );
    await this.options.archive?.archive(run.runId, previous ? folded.slice(1) : folded);
    await this.store.compactSteps(run.runId, base);
    return folded.length;
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
