import { dropStreams } from '../../composition/stream-retention';
import { formatDuration, parseDuration } from '../durations';
import { EXIT, usageError, type ExitCode } from '../exit-codes';
import { printJson, table, type CliIo } from '../output';
import { openSession, type GlobalOptions } from '../session';

export interface PruneStreamsOptions {
  olderThan: string;
  status?: string;
  dryRun?: boolean;
}

/**
 * `waypoint-durable prune-streams --older-than 7d`: drops the live-output streams of completed and
 * cancelled runs not updated for that long; the runs stay (`prune` deletes whole runs, streams included).
 */
export async function pruneStreams(globals: GlobalOptions, options: PruneStreamsOptions, io: CliIo): Promise<ExitCode> {
  const age = parseDuration(options.olderThan, '--older-than');
  const statuses = (options.status ?? 'completed,cancelled').split(',').map((s) => s.trim());
  for (const status of statuses) {
    if (status !== 'completed' && status !== 'cancelled') {
      throw usageError(`--status '${status}': prune-streams drops the streams of completed and cancelled runs only (a failed run may be resumed and its stream goes on).`);
    }
  }
  const session = await openSession(globals, io, { command: 'prune-streams' });
  try {
    const olderThan = new Date(Date.now() - age);
    const dropped = await dropStreams(session.waypoint.store, { olderThan, statuses: statuses as ('completed' | 'cancelled')[], dryRun: options.dryRun === true });
    if (globals.json) {
      printJson(io, { olderThan, statuses, dryRun: options.dryRun === true, runs: dropped });
      return EXIT.OK;
    }
    if (dropped.length > 0)
      io.out(
        table(
          ['RUN', 'EVENTS'],
          dropped.map((d) => [d.runId, String(d.events)]),
          [false, true],
        ),
      );
    const events = dropped.reduce((n, d) => n + d.events, 0);
    const what = `the streams of ${dropped.length} ${statuses.join('/')} run(s) not updated for ${formatDuration(age)} (${events} event(s))`;
    io.out(options.dryRun ? `Would drop ${what} (dry run; nothing deleted).\n` : `Dropped ${what}; the runs stay.\n`);
    return EXIT.OK;
  } finally {
    await session.close();
  }
}
