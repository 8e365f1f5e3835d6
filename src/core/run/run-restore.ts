import type { CheckpointStore, Fence, LoadedRun } from '../../contract/checkpoint-store';
import { cursorAt, nextPosition, restoreRun, type RestoredRun } from '../history/checkpoint-manager';
import type { Clock } from '../../contract/clock';
import type { Logger } from '../../contract/logger';
import type { ResolvedOptions } from './options';
import type { PipelinePlan } from '../plan/plan-reader';
import { firstInvalidStep, systemRow, verifySteps } from '../history/row-integrity';
import { serialize } from '../state/serializer';
import { loadResumable, RESUME_BASE_EVERY, takeResumeBase, type ResumableRun } from '../history/resume-base';
import type { RetentionManager } from '../history/retention';
import type { ChildStateReader } from '../flow/flow-executor';
import type { BoundaryWork } from './execution';

/**
 * How a run driver gets from a run's stored rows to a state to continue from: the rows are checked
 * (`onCorruption`: refuse, or fall back past a corrupted row), folded into the state, and a migrated
 * checkpoint is recorded as a base row before anything else is written.
 */
export class RunRestorer {
  constructor(
    private readonly store: CheckpointStore,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly options: ResolvedOptions,
  ) {}

  /**
   * Loads the rows a resume reads (from the run's resume snapshot on, when one fits) and throws
   * `CheckpointCorruptedError` for the first problem, writing nothing. Rows before a snapshot are checked
   * by `waypoint verify`, not by every resume.
   */
  async assertIntact(runId: string): Promise<ResumableRun | null> {
    const loaded = await loadResumable(this.store, runId, this.options.integrity);
    if (loaded) verifySteps(loaded.run, loaded.steps, this.options.integrity);
    return loaded;
  }

  /**
   * The rows to restore from, read under the lease: the rows `checked` read before the lease when nothing
   * moved since (the run row shows the same last row, status and version, and the lease this call took is
   * the next epoch, so no other executor held it in between), else read again. `verified`: the rows passed
   * every check already (the check before the lease, or the tail a snapshot read checks).
   *
   * @example
   * const { loaded } = await restorer.loadUnderLease('q3-aapl', keeper.epoch, await restorer.assertIntact('q3-aapl'));
   */
  async loadUnderLease(runId: string, epoch: number, checked: ResumableRun | null): Promise<{ loaded: ResumableRun | null; verified: boolean }> {
    if (checked) {
      const run = await this.store.getRun(runId);
      const before = checked.run;
      const unmoved = run !== null && run.lastSequence === before.lastSequence && run.status === before.status && run.pipelineVersion === before.pipelineVersion;
      if (unmoved && run.leaseEpoch === epoch && epoch === before.leaseEpoch + 1) return { loaded: { ...checked, run }, verified: true };
    }
    const loaded = await loadResumable(this.store, runId, this.options.integrity);
    return { loaded, verified: loaded?.fromSnapshot === true };
  }

  /**
   * Restores the run; with `onCorruption: 'fallback'`, a corrupted row and everything after it are
   * dropped and the run continues from the last valid checkpoint (those steps run again; their committed
   * side effects are not repeated). With no valid checkpoint left it refuses: it never starts over silently.
   */
  async restore(plan: PipelinePlan, loaded: LoadedRun, fence: Fence, verified = false): Promise<RestoredRun> {
    const runId = loaded.run.runId;
    const bad = this.options.onCorruption === 'fallback' && !verified ? firstInvalidStep(loaded.run, loaded.steps, this.options.integrity) : null;
    if (!bad) return restoreRun(plan, loaded, this.options.integrity, { verified });
    if (bad.index === 0) throw bad.error;
    const from = bad.sequence;
    const kept: LoadedRun = { run: { ...loaded.run, lastSequence: from - 1 }, steps: loaded.steps.slice(0, bad.index) };
    const restored = await restoreRun(plan, kept, this.options.integrity);
    await this.store.truncateSteps(runId, from, cursorAt(plan, nextPosition(plan, restored.completed)), fence);
    this.logger.error('corrupted checkpoint; fell back to the last valid one', { runId, pipeline: plan.name, corruptedSequence: from, error: bad.error.message });
    return restored;
  }

  /**
   * What the executor does every N rows at a top-level boundary: retention's compaction when configured
   * (it keeps the stored rows, and so a resume's reads, bounded), else a resume snapshot (every row kept).
   */
  boundaryWork(plan: PipelinePlan, retention: RetentionManager | undefined, fence: () => Fence, childState?: ChildStateReader): BoundaryWork {
    if (retention?.options.compactEvery) return { every: retention.options.compactEvery, compact: (id) => retention.compact(id, { plan, childState }) };
    const parts = { store: this.store, clock: this.clock, integrity: this.options.integrity };
    return { every: RESUME_BASE_EVERY, forResume: true, compact: async (id) => ((await takeResumeBase(parts, plan, id, fence(), childState)) === null ? 0 : 1) };
  }

  /** Records a migrated checkpoint as a base row (the version travels inside it), then the run's new version. */
  async recordMigration(plan: PipelinePlan, runId: string, restored: RestoredRun, fence: { epoch: number }): Promise<void> {
    const migration = restored.migration!;
    const sequence = restored.lastSequence + 1;
    const step = systemRow(
      runId,
      sequence,
      'base',
      serialize(migration.base, { runId, what: 'migrated checkpoint' }),
      serialize(migration.memories),
      this.clock.now(),
      this.options.integrity,
      restored.chain,
    );
    await this.store.appendStep({ step, run: { ...cursorAt(plan, nextPosition(plan, restored.completed)), status: 'running', resumeHint: null }, fence });
    await this.store.updateRun(runId, { pipelineVersion: plan.version }, fence);
    restored.lastSequence = sequence;
    restored.chain = { ...restored.chain, prev: step.sha256 };
    this.logger.warn('checkpoint migrated', { runId, pipeline: plan.name, from: migration.from, to: migration.to, sequence });
  }
}
