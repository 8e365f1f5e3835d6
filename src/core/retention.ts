import { mkdir, open } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { CheckpointStore, RunStatus, StepRecord } from '../storage/checkpoint-store';
import { foldRows } from './checkpoint-manager';
import { linkOf, runIdentity, systemRow, verifySteps, type Integrity } from './row-integrity';
import type { Clock } from './clock';
import { deserialize, serialize } from './serializer';
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

  /** Folds all but the newest `keepLast` rows of a run; returns how many rows were folded. */
  async compact(runId: string): Promise<number> {
    const loaded = await this.store.loadRun(runId);
    if (!loaded || loaded.steps.length <= this.keepLast + 1) return 0;
    const { run, steps } = loaded;
    verifySteps(run, steps, this.integrity);
    const folded = steps.slice(0, steps.length - this.keepLast);
    const last = folded[folded.length - 1]!;
    const state = foldRows(deserialize<Record<string, unknown>>(run.input), run.pipelineVersion, folded);
    const base = systemRow(
      runId,
      last.sequence,
      'base',
      // The row after the fold stays chained to the last folded row: the base names that row's digest.
      serialize({ state: state.state, completed: state.completed, version: state.version, replaces: linkOf(last) }, { runId, what: 'base snapshot' }),
      serialize(Object.fromEntries(state.memories)),
      this.clock.now(),
      this.integrity,
      { identity: runIdentity(run), prev: '' },
    );
    await this.options.archive?.archive(runId, folded);
    await this.store.compactSteps(runId, base);
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
