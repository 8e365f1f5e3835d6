import type { OperationRecord, RunRecord, StepRecord } from './records';
import type { StoredStreamEvent } from './run-stream';
import { WaypointError, reasonOf } from './waypoint-error';

/** Why rows went to the archive: folded by compaction (the run stays in the store) or pruned with their run. */
export type ArchiveKind = 'compaction' | 'prune';

/**
 * What one archive object holds: rows exactly as the store held them (payloads still sealed: encrypted
 * where the store encrypts, digests and HMACs untouched), so an archive never holds more plaintext than
 * the database did and a restore can check every row's seal and the chain across them.
 */
export interface ArchiveBatch {
  runId: string;
  kind: ArchiveKind;
  /** The run row (a prune archives it with the rows, so the run can be restored without the database). */
  run?: RunRecord;
  /** Step rows, ascending by sequence (a prune's may start with a base row written by compaction). */
  steps: StepRecord[];
  /** The run's committed-operations log (a prune archives it; a compaction leaves it in the store). */
  operations?: OperationRecord[];
  /** The run's live output, every event from offset 0, parts as stored (a prune archives it when the store keeps streams). */
  stream?: StoredStreamEvent[];
}

/** One object of a run's archive, as its manifest lists it. */
export interface ArchiveEntry {
  runId: string;
  /**
   * The object's name within the run's archive, derived from its content's range and kind only
   * (`compaction-<from>-<to>`, `prune-<from>-<to>`): writing the same batch again names the same object.
   */
  key: string;
  /** What wrote it; `legacy` for a file of an earlier release (step rows only, payloads as read). */
  kind: ArchiveKind | 'legacy';
  fromSequence: number;
  toSequence: number;
  /** Step rows in the object. */
  rows: number;
  /** Sequence and digest of the object's last row: equal digests mean equal rows up to it (the chain). */
  lastDigest: string;
  /** Size of the stored object in bytes. */
  bytes: number;
  /** Hex SHA-256 of the stored object's bytes, checked when it is read back. */
  sha256: string;
  archivedAt: Date;
}

/**
 * Where folded and pruned rows go before they leave the store, and where `waypoint.retention.restore`
 * reads them back. Built in: `GzipFileArchiveSink` (local files) and `S3ArchiveSink`
 * (`waypoint-durable/s3`); for GCS or Azure implement these four methods and hold the implementation to
 * `runArchiveSinkConformance` from `waypoint-durable/testing`.
 *
 * The contract:
 * - `write` is durable when it resolves (the rows are deleted from the store right after) and idempotent:
 *   the same batch written again (a retried prune or compaction) stores no second copy;
 * - `entries` finds a run's objects by its id without listing everything archived (a per-run manifest);
 * - `read` returns the batch exactly as written, or throws `CheckpointCorruptedError` when the stored
 *   object no longer matches the digest its entry records.
 *
 * @example
 * const waypoint = await Waypoint.create({ retention: { keepLast: 10, archive: new GzipFileArchiveSink('./archive') } });
 * await waypoint.retention.prune(new Date(Date.now() - 30 * 86_400_000));
 * await waypoint.retention.restore('q3-aapl'); // the pruned run is back: time travel, fork, verify
 */
export interface ArchiveSink {
  /** Stores one batch and records it in the run's manifest; returns its entry. Durable when it resolves. */
  write(batch: ArchiveBatch): Promise<ArchiveEntry>;
  /** The run's archive objects, oldest range first; none when nothing of the run is archived. */
  entries(runId: string): Promise<ArchiveEntry[]>;
  /** One object back, checked against its entry's digest (`CheckpointCorruptedError` when altered). */
  read(entry: ArchiveEntry): Promise<ArchiveBatch>;
  /** Ids of every run with something archived (for `archive list`; this one may list the whole archive). */
  runIds(): Promise<string[]>;
}

/**
 * The write-only sink of earlier releases (`archive(runId, rows)`), still accepted: folded rows go to it,
 * but nothing can be restored from it and a prune does not give it the run row.
 */
export interface WriteOnlyArchiveSink {
  /** Must be durable when it resolves: the rows are deleted from the store right after. */
  archive(runId: string, rows: readonly StepRecord[]): Promise<void>;
}

/** True when `sink` can read back (an `ArchiveSink`), not only write (a `WriteOnlyArchiveSink`). */
export function isReadableArchive(sink: ArchiveSink | WriteOnlyArchiveSink): sink is ArchiveSink {
  return typeof (sink as Partial<ArchiveSink>).write === 'function' && typeof (sink as Partial<ArchiveSink>).read === 'function';
}

/**
 * The archive sink failed to write or read an object. Nothing was deleted from the store for it: the
 * prune or compaction that needed it left the rows where they were and can simply be run again.
 *
 * @example
 * catch (err) { if (err instanceof ArchiveUnavailableError) scheduleRetry(); }
 */
export class ArchiveUnavailableError extends WaypointError {
  constructor(where: string, operation: string, cause: unknown, runId?: string) {
    super(
      'ARCHIVE_UNAVAILABLE',
      `Archive ${where} failed to ${operation}${runId === undefined ? '' : ` for run '${runId}'`}: ${reasonOf(cause)}. ` +
        `Nothing was deleted from the checkpoint store; run the prune, compaction or restore again once the archive answers.`,
      { runId, cause },
    );
  }
}

/** `retention.restore(runId)` found nothing to bring back for the run (or no run row to bring it back with). */
export class NotArchivedError extends WaypointError {
  constructor(runId: string, why: string) {
    super('NOT_ARCHIVED', `Run '${runId}' cannot be restored from the archive: ${why}. Check the run id and the archive sink configured in retention.archive.`, { runId });
  }
}
