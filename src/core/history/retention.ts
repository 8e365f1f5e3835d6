import { CheckpointStore, type LoadedRun, type RunRecord, type RunStatus, type StepRecord } from '../../contract/checkpoint-store';
import { foldRows } from './checkpoint-manager';
import type { BasePayload } from '../run/execution';
import type { ChildStateReader } from '../flow/flow-executor';
import { baseAtBoundary } from './boundary-base';
import { rowsNeedThePipeline } from './flow-base';
import { expandPaths } from './path-runs';
import type { PipelinePlan } from '../plan/plan-types';
import { linkOf, runIdentity, SYSTEM_AGENT, systemRow, verifySteps, type Integrity } from './row-integrity';
import type { Clock } from '../../contract/clock';
import { serialize } from '../state/serializer';
import { deserialize } from '../state/value-decoder';
import type { RetentionOptions } from '../../contract/options';
import { WaypointError } from '../../contract/waypoint-error';
import { isReadableArchive, type ArchiveBatch } from '../../contract/archive-sink';
import { restoreFromArchive, type RestoreReport, type SealedRows } from './archive-restore';
import { readWholeStream } from './archive-stream';
import { supportsStreams } from '../../contract/run-stream';

export type { ArchiveSink, RetentionOptions } from '../../contract/options';
export { GzipFileArchiveSink } from './gzip-file-archive';
export type { RestoreReport, SealedRows } from './archive-restore';

/**
 * Keeps stored runs bounded without losing the ability to resume: the oldest step rows of a run are
 * folded into one base snapshot row (state, memories, completed steps), archived, then deleted in one
 * store operation. The latest `keepLast` rows always stay as they are.
 */
export class RetentionManager {
  readonly keepLast: number;

  /** What archives read and restores write besides `store`: the rows as stored (sealed), and how to open them. */
  private readonly sealed: SealedRows;

  /**
   * `sealed` gives the rows as the database holds them (payloads still encrypted) for the archive, and opens
   * them on restore. Without it they are found from `store`: under a payload codec (`EncryptingCheckpointStore`,
   * any `CodecCheckpointStore`: an `inner` store and `openArchived`) its inner store, else `store` itself.
   */
  constructor(
    private readonly store: CheckpointStore,
    private readonly clock: Clock,
    private readonly integrity: Integrity,
    readonly options: RetentionOptions = {},
    sealed?: SealedRows,
  ) {
    this.keepLast = Math.max(1, options.keepLast ?? 10);
    this.sealed = sealed ?? sealedRowsOf(store);
  }

  /**
   * The same manager with other options (the CLI's `--keep-last`, `--archive`), on the same store, clock,
   * seals and encryption.
   *
   * @example
   * await waypoint.retention.withOptions({ keepLast: 5, archive: new GzipFileArchiveSink('./archive') }).compact('q3-aapl');
   */
  withOptions(options: RetentionOptions): RetentionManager {
    return new RetentionManager(this.store, this.clock, this.integrity, options, this.sealed);
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
    return (await this.writeBase(run, folded, payload, state.memories, undefined)) ? folded.length : 0;
  }

  /**
   * Folds at a top-level boundary (see `baseAtBoundary`): the latest boundary whose rows are exactly a
   * prefix of the run's rows, leaving at least `keepLast` rows, is folded into a base row holding the state
   * and memories there (and what an earlier base carried past it). Work inside a construct in flight is
   * never folded.
   */
  private async compactAtBoundary(loaded: LoadedRun, plan: PipelinePlan, childState?: ChildStateReader): Promise<number> {
    const { run, steps } = loaded;
    const limit = steps[steps.length - 1 - this.keepLast].sequence;
    const base = await baseAtBoundary(plan, loaded, limit, this.integrity, childState);
    if (!base) return 0;
    // A retention base row lists its folded paths in full (the form every release reads).
    const payload: BasePayload = { ...base.payload, completed: expandPaths(base.completed) };
    return (await this.writeBase(run, base.folded, payload, base.memories, base.previous)) ? base.folded.length : 0;
  }

  /** Writes the base row that replaces `folded` (archived first; an earlier base row is not archived again). */
  private async writeBase(run: RunRecord, folded: readonly StepRecord[], payload: BasePayload, memories: Map<string, string>, previous: StepRecord | undefined): Promise<boolean> {
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
    const archived = await this.archiveFolded(run.runId, isBase ? folded.slice(1) : folded);
    // Rows that changed between the fold and the archive read (a concurrent truncation) are not folded now.
    if (archived) await this.store.compactSteps(run.runId, base);
    return archived;
  }

  /**
   * Archives the rows a compaction is about to fold, as stored (sealed), leaving out those the archive
   * already holds (a compaction retried after its store write failed uploads no second copy). False when
   * the stored rows are no longer the ones folded.
   */
  private async archiveFolded(runId: string, rows: readonly StepRecord[]): Promise<boolean> {
    const sink = this.options.archive;
    if (!sink || rows.length === 0) return true;
    if (!isReadableArchive(sink)) {
      await sink.archive(runId, rows);
      return true;
    }
    const stored = await this.sealed.raw.listSteps(runId, { fromSequence: rows[0].sequence, toSequence: rows[rows.length - 1].sequence });
    if (stored.length !== rows.length || stored.some((row, i) => row.sha256 !== rows[i].sha256)) return false;
    // Equal digests of a row mean equal rows up to it (each digest chains the one before).
    const held = new Set((await sink.entries(runId)).map((entry) => entry.lastDigest));
    let from = 0;
    for (let i = stored.length - 1; i >= 0; i--) {
      if (held.has(stored[i].sha256)) {
        from = i + 1;
        break;
      }
    }
    if (from < stored.length) await sink.write({ runId, kind: 'compaction', steps: stored.slice(from) });
    return true;
  }

  /**
   * Deletes finished runs (archiving them first: run row, rows and operations, as stored) last updated
   * before `olderThan`; returns their ids. A run is deleted only once its archive write resolved: when
   * the archive fails, the error propagates and that run and the ones after it stay in the store.
   */
  async prune(olderThan: Date, statuses: RunStatus[] = ['completed', 'cancelled', 'failed']): Promise<string[]> {
    const pruned: string[] = [];
    for (const run of await this.store.listRuns({ status: statuses })) {
      if (run.updatedAt >= olderThan) continue;
      if (await this.pruneRun(run.runId, { olderThan, statuses })) pruned.push(run.runId);
    }
    return pruned;
  }

  /**
   * Prunes one run if it still has one of `statuses` and was last updated before `olderThan` (read again
   * here, so a run resumed since it was listed is left alone): archived, then deleted. True when pruned.
   */
  async pruneRun(runId: string, when: { olderThan: Date; statuses: readonly RunStatus[] }): Promise<boolean> {
    const run = await this.sealed.raw.getRun(runId);
    if (!run || !when.statuses.includes(run.status) || run.updatedAt >= when.olderThan) return false;
    const sink = this.options.archive;
    if (sink && isReadableArchive(sink)) {
      const raw = this.sealed.raw;
      const stream = supportsStreams(raw) ? await readWholeStream(raw, runId) : [];
      const batch: ArchiveBatch = {
        runId,
        kind: 'prune',
        run,
        steps: await raw.listSteps(runId),
        operations: await raw.listOperations(runId),
        ...(stream.length > 0 ? { stream } : {}),
      };
      await sink.write(batch);
    } else if (sink) {
      await sink.archive(runId, await this.store.listSteps(runId));
    }
    await this.store.deleteRun(runId);
    return true;
  }

  /**
   * Brings a run back from the archive: a pruned run whole (run row, every archived row, operations), or
   * the rows a compaction folded of a run still in the store (its base row replaced by them). Every row
   * is checked (digest or HMAC, and the chain across all of them) before anything is written: an altered
   * archive object is `CheckpointCorruptedError` and the store is left as it was. Payloads are opened
   * and sealed again by the store, so they stay encrypted when it encrypts.
   *
   * @example
   * const report = await waypoint.retention.restore('q3-aapl'); // { restored: 'run', rows: 120, ... }
   * await waypoint.checkpoint('q3-aapl', 5);                      // time travel into the archived part
   */
  restore(runId: string): Promise<RestoreReport> {
    const sink = this.options.archive;
    if (!sink || !isReadableArchive(sink)) {
      return Promise.reject(
        new WaypointError(
          'INVALID_OPTIONS',
          `Cannot restore run '${runId}': ${sink ? 'the configured retention.archive only writes (archive(runId, rows))' : 'no retention.archive is configured'}. Configure a readable ArchiveSink (GzipFileArchiveSink, S3ArchiveSink).`,
          { runId },
        ),
      );
    }
    return restoreFromArchive({ store: this.store, sealed: this.sealed, integrity: this.integrity, sink }, runId);
  }
}

/**
 * The rows as stored behind `store`: a codec wrapper is recognised by its shape (the runtime names no
 * store class), so an archive never receives payloads the wrapper opened.
 */
export function sealedRowsOf(store: CheckpointStore): SealedRows {
  const coded = store as CheckpointStore & { inner?: unknown; openArchived?: (batch: ArchiveBatch) => ArchiveBatch };
  if (coded.inner instanceof CheckpointStore && typeof coded.openArchived === 'function') {
    const inner = coded.inner;
    return { raw: inner, open: (batch) => coded.openArchived!(batch) };
  }
  return { raw: store, open: (batch) => batch };
}
