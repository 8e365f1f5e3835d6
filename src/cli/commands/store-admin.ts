import type { RunStatus } from '../../contract/checkpoint-store';
import { formatAge } from '../durations';
import { EXIT, type ExitCode } from '../exit-codes';
import { printJson, table, type CliIo } from '../output';
import { openSession, type GlobalOptions } from '../session';
import { RUN_STATUSES, summarize } from './runs-list';

/**
 * `waypoint-durable migrate`: creates the store or applies its pending schema migrations (`store.init()`, under
 * the store's migration lock, so concurrent deploys are safe). Idempotent.
 */
export async function migrate(globals: GlobalOptions, io: CliIo): Promise<ExitCode> {
  const session = await openSession(globals, io, { command: 'migrate', create: true });
  try {
    const state = session.wasInitialized === false ? 'created' : 'up to date';
    if (globals.json) printJson(io, { store: session.storeDisplay, backend: session.waypoint.store.backend, state });
    else io.out(`Store ${session.storeDisplay} ${state === 'created' ? 'created, schema migrations applied' : 'is up to date (pending schema migrations, if any, applied)'}.\n`);
    return EXIT.OK;
  } finally {
    await session.close();
  }
}

/** What `stats --json` prints. */
export interface StoreStats {
  store: string;
  runs: number;
  checkpoints: number;
  byStatus: Record<RunStatus, number>;
  /** Running runs without a live lease: their worker died. */
  stale: number;
  byPipeline: Record<string, Record<RunStatus, number>>;
  oldestUnfinished: { runId: string; status: RunStatus; updatedAt: Date } | null;
}

/** `waypoint-durable stats`: runs by status and pipeline, stale runs, checkpoints stored, the oldest unfinished run. */
export async function stats(globals: GlobalOptions, io: CliIo): Promise<ExitCode> {
  const session = await openSession(globals, io, { command: 'stats' });
  try {
    const now = new Date();
    const runs = await session.waypoint.store.listRuns();
    const zero = () => Object.fromEntries(RUN_STATUSES.map((s) => [s, 0])) as Record<RunStatus, number>;
    const result: StoreStats = { store: session.storeDisplay, runs: runs.length, checkpoints: 0, byStatus: zero(), stale: 0, byPipeline: {}, oldestUnfinished: null };
    for (const run of runs) {
      result.checkpoints += run.lastSequence;
      result.byStatus[run.status] += 1;
      (result.byPipeline[run.pipelineName] ??= zero())[run.status] += 1;
      if (summarize(run, now).stale) result.stale += 1;
      const unfinished = run.status === 'running' || run.status === 'paused' || run.status === 'waiting' || run.status === 'failed';
      if (unfinished && (!result.oldestUnfinished || run.updatedAt < result.oldestUnfinished.updatedAt)) {
        result.oldestUnfinished = { runId: run.runId, status: run.status, updatedAt: run.updatedAt };
      }
    }
    if (globals.json) {
      printJson(io, result);
      return EXIT.OK;
    }
    io.out(`Store ${result.store}: ${result.runs} run(s), ${result.checkpoints} checkpoint(s)\n\n`);
    const statusRows = RUN_STATUSES.map((s) => [s, String(result.byStatus[s]), s === 'running' && result.stale > 0 ? `${result.stale} stale (no live worker; resume them)` : '']);
    io.out(table(['STATUS', 'RUNS', ''], statusRows, [false, true, false]) + '\n');
    const pipelines = Object.entries(result.byPipeline).sort(([a], [b]) => a.localeCompare(b));
    if (pipelines.length > 0) {
      const rows = pipelines.map(([name, counts]) => [name, String(Object.values(counts).reduce((a, b) => a + b, 0)), ...RUN_STATUSES.map((s) => String(counts[s]))]);
      io.out(table(['PIPELINE', 'RUNS', ...RUN_STATUSES.map((s) => s.toUpperCase())], rows, [false, true, ...RUN_STATUSES.map(() => true)]) + '\n');
    }
    const oldest = result.oldestUnfinished;
    io.out(oldest ? `Oldest unfinished run: ${oldest.runId} (${oldest.status}, updated ${formatAge(oldest.updatedAt, now)})\n` : 'No unfinished runs.\n');
    return EXIT.OK;
  } finally {
    await session.close();
  }
}
