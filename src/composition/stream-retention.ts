/*
 * Retention of live output (issue 37): a finished run's stream is what a person watched while it ran;
 * once nobody will watch it again it can go while the run (its checkpoints, its result) stays.
 * `dropStreams` deletes the streams of completed and cancelled runs last updated before a cutoff.
 * Failed runs are left out: a failed run may be resumed and its stream goes on, so dropping it would
 * restart its offsets under a reader. Deleting or pruning a run takes its stream anyway.
 */
import type { CheckpointStore, RunStatus } from '../contract/checkpoint-store';
import { WaypointError } from '../contract/errors';

/** Options of {@link dropStreams}. */
export interface DropStreamsOptions {
  /** Runs last updated before this instant. */
  olderThan: Date;
  /** Which finished runs (default both): only these two, since their streams never grow again. */
  statuses?: ('completed' | 'cancelled')[];
  /** List what would be dropped (with each stream's length), drop nothing. */
  dryRun?: boolean;
}

/** A run whose stream was dropped (or would be, in a dry run), with how many events it held. */
export interface DroppedStream {
  runId: string;
  events: number;
}

const DROPPABLE: ReadonlySet<RunStatus> = new Set<RunStatus>(['completed', 'cancelled']);

/**
 * Deletes the live-output streams of completed and cancelled runs not updated since `olderThan`; the
 * runs stay (their checkpoints, results and `runs show` are unchanged, their stream reads empty). Runs
 * without events are left out of the answer. A run resumed or changed since the listing is left alone.
 *
 * @example
 * const dropped = await dropStreams(waypoint.store, { olderThan: new Date(Date.now() - 7 * 86_400_000) });
 */
export async function dropStreams(store: CheckpointStore, options: DropStreamsOptions): Promise<DroppedStream[]> {
  const statuses = options.statuses ?? ['completed', 'cancelled'];
  for (const status of statuses) {
    if (!DROPPABLE.has(status)) {
      throw new WaypointError(
        'INVALID_ARGUMENT',
        `dropStreams drops the streams of completed and cancelled runs only, not '${String(status)}': a failed run may be resumed and its stream goes on.`,
      );
    }
  }
  if (!(options.olderThan instanceof Date) || Number.isNaN(options.olderThan.getTime())) {
    throw new WaypointError('INVALID_ARGUMENT', `dropStreams needs olderThan, a valid Date, got ${String(options.olderThan)}.`);
  }
  if (!store.dropStream || !store.streamLength) {
    throw new WaypointError(
      'STREAMS_UNSUPPORTED',
      `The checkpoint store (${store.constructor.name}) cannot drop run streams (it has no dropStream): prune whole runs instead, or add dropStream to it.`,
    );
  }
  const dropped: DroppedStream[] = [];
  for (const listed of await store.listRuns({ status: statuses })) {
    if (listed.updatedAt >= options.olderThan) continue;
    const run = await store.getRun(listed.runId);
    if (!run || !statuses.includes(run.status as 'completed' | 'cancelled') || run.updatedAt >= options.olderThan) continue;
    const events = options.dryRun ? await store.streamLength(run.runId) : await store.dropStream(run.runId);
    if (events > 0) dropped.push({ runId: run.runId, events });
  }
  return dropped;
}
