import { rowsNeedThePipeline } from '../../core/history/flow-base';
import { archiveSinkFor } from '../archive-target';
import type { RunStatus } from '../../contract/checkpoint-store';
import { formatAge, formatDuration, parseCount, parseDuration } from '../durations';
import { EXIT, usageError, type ExitCode, runNotFound } from '../exit-codes';
import { printJson, table, type CliIo } from '../output';
import { Progress } from '../progress';
import { openSession, type GlobalOptions } from '../session';
import { parseStatuses } from './runs-list';

export interface PruneOptions {
  olderThan: string;
  status?: string;
  archive?: string;
  dryRun?: boolean;
}

/**
 * `waypoint-durable prune --older-than 30d`: deletes finished runs (completed, cancelled, failed by default) last
 * updated before then, with their checkpoints and operations, archiving their rows first with
 * `--archive <dir>`. `--dry-run` lists them only. A running run is never pruned.
 */
export async function prune(globals: GlobalOptions, options: PruneOptions, io: CliIo): Promise<ExitCode> {
  const age = parseDuration(options.olderThan, '--older-than');
  const statuses: RunStatus[] = options.status ? parseStatuses(options.status) : ['completed', 'cancelled', 'failed'];
  if (statuses.includes('running'))
    throw usageError('The prune command never deletes running runs: cancel them first (waypoint-durable runs cancel <id>), or leave running out of --status.');
  const session = await openSession(globals, io, { command: 'prune' });
  try {
    const store = session.waypoint.store;
    const now = new Date();
    const olderThan = new Date(now.getTime() - age);
    const candidates = (await store.listRuns({ status: statuses })).filter((run) => run.updatedAt < olderThan);
    const archive = options.archive ? archiveSinkFor(options.archive) : session.waypoint.retention.options.archive;
    const retention = session.waypoint.retention.withOptions({ ...session.waypoint.retention.options, archive });
    const pruned: string[] = [];
    if (!options.dryRun) {
      const progress = new Progress(io, 'prune', candidates.length, globals.progress !== false);
      for (const listed of candidates) {
        // Run by run so progress shows; pruneRun reads the run again, so one resumed since the listing is left alone.
        if (await retention.pruneRun(listed.runId, { olderThan, statuses })) pruned.push(listed.runId);
        progress.tick(listed.runId);
      }
      progress.done();
    }
    if (globals.json) {
      printJson(io, { olderThan, statuses, dryRun: options.dryRun === true, runs: options.dryRun ? candidates.map((r) => r.runId) : pruned, archive: options.archive ?? null });
      return EXIT.OK;
    }
    const listed = options.dryRun ? candidates : candidates.filter((r) => pruned.includes(r.runId));
    if (listed.length > 0)
      io.out(
        table(
          ['RUN', 'PIPELINE', 'STATUS', 'UPDATED'],
          listed.map((r) => [r.runId, r.pipelineName, r.status, formatAge(r.updatedAt, now)]),
        ),
      );
    const what = `${listed.length} ${statuses.join('/')} run(s) not updated for ${formatDuration(age)}`;
    io.out(
      options.dryRun
        ? `Would prune ${what} (dry run; nothing deleted).\n`
        : `Pruned ${what}${archive ? `; archived first${options.archive ? ` under ${options.archive}` : ''}` : ''}.\n`,
    );
    return EXIT.OK;
  } finally {
    await session.close();
  }
}

export interface CompactOptions {
  keepLast?: string;
  archive?: string;
  status?: string;
}

/**
 * `waypoint-durable compact [runId...] [--keep-last 10]`: folds all but the newest checkpoints of each run into
 * one base snapshot (archived first with `--archive <dir>`); resuming and the latest checkpoint are
 * unaffected. By default every run that is not running (an executor compacts its own with `compactEvery`).
 */
export async function compact(globals: GlobalOptions, runIds: string[], options: CompactOptions, io: CliIo): Promise<ExitCode> {
  const keepLast = options.keepLast === undefined ? 10 : parseCount(options.keepLast, '--keep-last');
  const statuses: RunStatus[] = options.status ? parseStatuses(options.status) : ['paused', 'waiting', 'completed', 'failed', 'cancelled'];
  const session = await openSession(globals, io, { command: 'compact' });
  try {
    const store = session.waypoint.store;
    const ids = runIds.length > 0 ? runIds : (await store.listRuns({ status: statuses })).map((r) => r.runId);
    for (const id of runIds) if (!(await store.getRun(id))) throw runNotFound(id, session.storeDisplay);
    const archive = options.archive ? archiveSinkFor(options.archive) : session.waypoint.retention.options.archive;
    const retention = session.waypoint.retention.withOptions({ keepLast, archive });
    const progress = new Progress(io, 'compact', ids.length, globals.progress !== false);
    const folded: { runId: string; rows: number }[] = [];
    const leftAsIs: string[] = [];
    for (const id of ids) {
      // A control-flow run folds only with its pipeline's plan (the module's, of the run's version); without it, it is left as it is.
      const run = await store.getRun(id);
      const plan = run ? session.plans.get(run.pipelineName) : undefined;
      const known = plan && plan.version === run?.pipelineVersion ? plan : undefined;
      const rows = await retention.compact(id, { plan: known });
      if (rows === 0 && !known && rowsNeedThePipeline(await store.listSteps(id))) leftAsIs.push(id);
      if (rows > 0) folded.push({ runId: id, rows });
      progress.tick(rows > 0 ? `${id}: ${rows} folded` : id);
    }
    progress.done();
    const total = folded.reduce((sum, f) => sum + f.rows, 0);
    if (globals.json) printJson(io, { keepLast, runs: ids.length, compacted: folded, rowsFolded: total, leftAsIs });
    else io.out(`Compacted ${folded.length} of ${ids.length} run(s): ${total} checkpoint row(s) folded into base snapshots, the newest ${keepLast} of each kept as rows.\n`);
    if (leftAsIs.length > 0) {
      io.err(
        `${leftAsIs.length} control-flow run(s) left as they are (${leftAsIs.slice(0, 5).join(', ')}${leftAsIs.length > 5 ? ', ...' : ''}): folding them needs their pipeline of the run's version; pass --module with it.\n`,
      );
    }
    return EXIT.OK;
  } finally {
    await session.close();
  }
}
