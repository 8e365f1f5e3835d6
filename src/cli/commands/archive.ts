import type { ArchiveSink, ArchiveEntry } from '../../contract/archive-sink';
import { isReadableArchive } from '../../contract/archive-sink';
import { archiveSinkFor } from '../archive-target';
import { usageError, EXIT, type ExitCode } from '../exit-codes';
import { printJson, table, type CliIo } from '../output';
import { openSession, type GlobalOptions, type Session } from '../session';

export interface ArchiveCliOptions {
  archive?: string;
}

/**
 * `waypoint-durable archive list [runId]`: without a run id, the ids of every run with something archived;
 * with one, that run's archive objects (kind, sequences, rows, size, when). The archive is `--archive`
 * (a directory or s3://bucket/prefix), else the module's `retention.archive`.
 */
export async function archiveList(globals: GlobalOptions, runId: string | undefined, options: ArchiveCliOptions, io: CliIo): Promise<ExitCode> {
  const session = await openSession(globals, io, { command: 'archive list' });
  try {
    const sink = sinkOf(session, options);
    if (runId === undefined) {
      const ids = await sink.runIds();
      if (globals.json) printJson(io, { runs: ids });
      else io.out(ids.length === 0 ? 'Nothing is archived.\n' : `${ids.join('\n')}\n${ids.length} run(s) archived.\n`);
      return EXIT.OK;
    }
    const entries = await sink.entries(runId);
    const stored = await session.waypoint.store.getRun(runId);
    if (globals.json) {
      printJson(io, { runId, inStore: stored !== null, entries });
      return EXIT.OK;
    }
    if (entries.length === 0) {
      io.out(`Nothing of run '${runId}' is archived.\n`);
      return EXIT.NOT_FOUND;
    }
    io.out(table(['OBJECT', 'KIND', 'SEQUENCES', 'ROWS', 'BYTES', 'ARCHIVED'], entries.map(rowOf), [false, false, false, true, true, false]));
    io.out(`${entries.length} object(s); the run is ${stored ? 'in the store' : 'not in the store (pruned): waypoint-durable archive restore ' + runId + ' brings it back'}.\n`);
    return EXIT.OK;
  } finally {
    await session.close();
  }
}

/**
 * `waypoint-durable archive restore <runId>`: brings a pruned run back into the store (or the folded rows
 * of a compacted one), after checking every archived row; exit 4 when an archive object was altered.
 */
export async function archiveRestore(globals: GlobalOptions, runId: string, options: ArchiveCliOptions, io: CliIo): Promise<ExitCode> {
  const session = await openSession(globals, io, { command: 'archive restore' });
  try {
    const sink = sinkOf(session, options);
    const report = await session.waypoint.retention.withOptions({ ...session.waypoint.retention.options, archive: sink }).restore(runId);
    if (globals.json) printJson(io, report);
    else if (report.restored === 'nothing') io.out(`Run '${runId}' already holds every archived row; nothing restored.\n`);
    else
      io.out(
        `Restored ${report.restored === 'run' ? 'pruned run' : 'folded rows of run'} '${runId}': ${report.rows} row(s) from ${report.objects} archive object(s); checkpoints ${report.fromSequence}..${report.toSequence} are in the store.\n`,
      );
    return EXIT.OK;
  } finally {
    await session.close();
  }
}

function sinkOf(session: Session, options: ArchiveCliOptions): ArchiveSink {
  const sink = options.archive ? archiveSinkFor(options.archive) : session.waypoint.retention.options.archive;
  if (!sink) throw usageError('No archive: pass --archive <dir | s3://bucket/prefix>, or configure retention.archive in --module.');
  if (!isReadableArchive(sink))
    throw usageError("The module's retention.archive only writes (an archive(runId, rows) sink): pass --archive <dir | s3://bucket/prefix> to read one.");
  return sink;
}

function rowOf(entry: ArchiveEntry): string[] {
  return [
    entry.key,
    entry.kind,
    `${entry.fromSequence}..${entry.toSequence}`,
    String(entry.rows),
    String(entry.bytes),
    entry.archivedAt.getTime() === 0 ? '-' : entry.archivedAt.toISOString(),
  ];
}
