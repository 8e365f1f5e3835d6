import { NotArchivedError, type ArchiveBatch, type ArchiveSink } from '../../contract/archive-sink';
import type { CheckpointStore, RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { SYSTEM_AGENT, verifySteps, type Integrity } from './row-integrity';

/**
 * The rows as the database holds them, for the archive: `raw` is the store under any payload codec
 * (encryption), `open` decodes sealed payloads as a read through the store would (and throws
 * `CheckpointCorruptedError` for one that does not open). Without a codec: the store itself, and identity.
 */
import { restoreStream } from './archive-stream';
import { supportsStreams } from '../../contract/run-stream';

export interface SealedRows {
  readonly raw: CheckpointStore;
  open(batch: ArchiveBatch): ArchiveBatch;
}

/** What `retention.restore(runId)` brought back. */
export interface RestoreReport {
  runId: string;
  /** `run`: a pruned run, whole; `rows`: folded rows put back under a run still stored; `nothing`: all already there. */
  restored: 'run' | 'rows' | 'nothing';
  /** Step rows written. */
  rows: number;
  /** The run's stored sequences after the restore (`fromSequence` 1 unless a base row had to stay). */
  fromSequence: number;
  toSequence: number;
  /** Archive objects read. */
  objects: number;
}

interface RestoreDeps {
  store: CheckpointStore;
  sealed: SealedRows;
  integrity: Integrity;
  sink: ArchiveSink;
}

/** See `RetentionManager.restore`. Reads every object of the run, checks all rows, then writes. */
export async function restoreFromArchive(deps: RestoreDeps, runId: string): Promise<RestoreReport> {
  const { store, sealed, integrity, sink } = deps;
  const entries = await sink.entries(runId);
  if (entries.length === 0) throw new NotArchivedError(runId, 'the archive holds nothing of it');
  const batches: ArchiveBatch[] = [];
  for (const entry of entries) batches.push(sealed.open(await sink.read(entry)));
  const archived = new Map<number, StepRecord>();
  let pruned: ArchiveBatch | undefined;
  let prunedAt = new Date(0);
  for (const [index, batch] of batches.entries()) {
    for (const row of batch.steps) if (!isBaseRow(row)) archived.set(row.sequence, row);
    // The latest prune: most rows, then the most recently archived (a run restored, changed and pruned again).
    if (
      batch.run &&
      (!pruned || batch.run.lastSequence > pruned.run!.lastSequence || (batch.run.lastSequence === pruned.run!.lastSequence && entries[index].archivedAt >= prunedAt))
    ) {
      pruned = batch;
      prunedAt = entries[index].archivedAt;
    }
  }
  const existing = await store.loadRun(runId);
  // A run row without rows, with a pruned copy in the archive, is a restore that stopped half way: redo it.
  const halfRestored = existing !== null && existing.steps.length === 0 && pruned !== undefined && pruned.run!.lastSequence > 0;
  if (existing && !halfRestored) return restoreFolded(store, integrity, existing.run, existing.steps, archived, entries.length);
  if (!pruned)
    throw new NotArchivedError(runId, 'the archive holds rows folded by compaction but not the run row, which only a prune archives (and releases before this one did not)');
  const run = pruned.run!;
  const rows = withOlderRows(pruned.steps, archived);
  verifySteps(run, rows, integrity);
  // Rows last: until they are written the run has none, which a second restore recognises and completes.
  await store.createRun({
    runId,
    pipelineName: run.pipelineName,
    pipelineVersion: run.pipelineVersion,
    input: run.input,
    metadata: run.metadata,
    parentRunId: run.parentRunId ?? null,
  });
  await store.updateRun(runId, { status: run.status, error: run.error, resumeHint: run.resumeHint, cursorAgent: run.cursorAgent, cursorStep: run.cursorStep }, null);
  for (const op of pruned.operations ?? []) {
    const { createdAt: _created, updatedAt: _updated, ...write } = op;
    await store.writeOperation(write, { ifAbsent: true });
  }
  // The live output as archived (sealed parts stay sealed: written through the raw store), before the rows.
  if (pruned.stream && pruned.stream.length > 0 && supportsStreams(sealed.raw)) await restoreStream(sealed.raw, runId, pruned.stream);
  if (rows.length > 0) await store.replaceSteps(runId, { fromSequence: 1, rows, cursor: { cursorAgent: run.cursorAgent, cursorStep: run.cursorStep } });
  return { runId, restored: 'run', rows: rows.length, fromSequence: rows[0]?.sequence ?? 0, toSequence: run.lastSequence, objects: entries.length };
}

/** A run still in the store whose oldest row is a base: the archived rows it replaced go back in its place. */
async function restoreFolded(
  store: CheckpointStore,
  integrity: Integrity,
  run: RunRecord,
  steps: StepRecord[],
  archived: Map<number, StepRecord>,
  objects: number,
): Promise<RestoreReport> {
  const first = steps[0];
  const nothing: RestoreReport = { runId: run.runId, restored: 'nothing', rows: 0, fromSequence: first?.sequence ?? 0, toSequence: run.lastSequence, objects };
  if (!first || !isBaseRow(first)) return nothing;
  const older = contiguous(archived, first.sequence);
  if (!older) return nothing;
  verifySteps(run, [...older, ...steps.slice(1)], integrity);
  await store.replaceSteps(run.runId, { fromSequence: 1, toSequence: first.sequence, rows: older });
  return { ...nothing, restored: 'rows', rows: older.length, fromSequence: 1 };
}

/** `rows` with a leading base row replaced by the archived rows 1..its sequence, when the archive has them all. */
function withOlderRows(rows: StepRecord[], archived: Map<number, StepRecord>): StepRecord[] {
  const first = rows[0];
  if (!first || !isBaseRow(first)) return rows;
  const older = contiguous(archived, first.sequence);
  return older ? [...older, ...rows.slice(1)] : rows;
}

/** The archived rows 1..`to`, or undefined when one is missing (folded without an archive: the base stays). */
function contiguous(archived: Map<number, StepRecord>, to: number): StepRecord[] | undefined {
  const rows: StepRecord[] = [];
  for (let sequence = 1; sequence <= to; sequence++) {
    const row = archived.get(sequence);
    if (!row) return undefined;
    rows.push(row);
  }
  return rows;
}

function isBaseRow(row: StepRecord): boolean {
  return row.agentId === SYSTEM_AGENT && row.stepName === 'base';
}
