import { CheckpointCorruptedError, WaypointError } from '../../contract/errors';
import type { CheckpointStore, RunFilter, RunRecord } from '../../contract/checkpoint-store';
import { EncryptingCheckpointStore } from '../../storage/encrypting-store';
import { CliError, EXIT, type ExitCode, runNotFound } from '../exit-codes';
import { assertVerifiable, corruptionReason, scanRun, type IntegrityProblem } from '../integrity-scan';
import { printJson, table, type CliIo } from '../output';
import { Progress } from '../progress';
import { openSession, type GlobalOptions, type Session } from '../session';
import { parseStatuses } from './runs-list';

export interface VerifyOptions {
  status?: string;
  pipeline?: string;
}

/** What `verify --json` prints. */
export interface VerifyReport {
  store: string;
  runs: number;
  rows: number;
  corrupted: IntegrityProblem[];
  ok: boolean;
}

/**
 * `waypoint-durable verify [runId...]`: checks every row of every run (or of the given runs): digest or HMAC,
 * identity, gaps, and the run row's last sequence. Lists every problem of every run, whatever a row holds:
 * an error while checking one run (an unreadable row, a digest that cannot be compared) is reported as
 * that run's problem and the other runs are still checked. Exit 4 when anything was found, 0 when clean.
 */
export async function verify(globals: GlobalOptions, runIds: string[], options: VerifyOptions, io: CliIo): Promise<ExitCode> {
  const filter: RunFilter = {};
  if (options.status) filter.status = parseStatuses(options.status);
  if (options.pipeline) filter.pipelineName = options.pipeline;
  const session = await openSession(globals, io, { command: 'verify' });
  try {
    const store = session.waypoint.store;
    // Runs are listed as stored: listing through the decrypting wrapper would open every input and stop
    // at the first one no configured key opens, instead of reporting that run below like any other.
    const listing = store instanceof EncryptingCheckpointStore ? store.inner : store;
    const runs =
      runIds.length > 0
        ? await Promise.all(runIds.map(async (id) => (await listing.getRun(id)) ?? Promise.reject(runNotFound(id, session.storeDisplay))))
        : await listing.listRuns(filter);
    const progress = new Progress(io, 'verify', runs.length, globals.progress !== false);
    const report: VerifyReport = { store: session.storeDisplay, runs: 0, rows: 0, corrupted: [], ok: true };
    // SQLite reads from one handle in this process; a server store answers a few loads at once.
    await inPool(runs, store.backend === 'sqlite' ? 1 : 4, async (run) => {
      const { rows, problems } = await checkRun(store, run, session);
      report.runs += 1;
      report.rows += rows;
      report.corrupted.push(...problems);
      progress.tick(problems.length ? `${run.runId}: ${problems.length} corrupted` : run.runId);
    });
    progress.done();
    report.corrupted.sort((a, b) => a.runId.localeCompare(b.runId) || (a.sequence ?? -1) - (b.sequence ?? -1));
    report.ok = report.corrupted.length === 0;
    if (globals.json) printJson(io, report);
    else io.out(renderReport(report));
    return report.ok ? EXIT.OK : EXIT.CORRUPTED;
  } finally {
    await session.close();
  }
}

async function checkRun(store: CheckpointStore, run: RunRecord, session: Session): Promise<{ rows: number; problems: IntegrityProblem[] }> {
  let rows = 0;
  try {
    const loaded = await store.loadRun(run.runId);
    if (!loaded) return { rows: 0, problems: [] }; // deleted since it was listed
    rows = loaded.steps.length;
    assertVerifiable(run.runId, loaded.steps, { encrypted: session.encrypted, hmac: session.integrity.hmacKey !== undefined });
    return { rows, problems: scanRun(loaded.run, loaded.steps, session.integrity) };
  } catch (error) {
    if (!reportable(error)) throw error;
    // Whatever a row holds, one run's failure is that run's problem: the other runs are still checked and
    // reported. A store that decrypts on load (encryption at rest) reports a tampered ciphertext here.
    return { rows, problems: [problemOf(run.runId, error)] };
  }
}

/**
 * Errors that end the whole command instead of being one run's problem: a usage error (this process cannot
 * judge the rows: no HMAC key, no encryption keys) and an unreachable store (nothing could be checked;
 * exit 5, not 4).
 */
function reportable(error: unknown): boolean {
  if (error instanceof CliError) return false;
  return !(error instanceof WaypointError && error.code === 'STORE_UNAVAILABLE');
}

function problemOf(runId: string, error: unknown): IntegrityProblem {
  if (error instanceof CheckpointCorruptedError) return { runId, sequence: error.sequence, step: null, reason: corruptionReason(error.message) };
  const what = error instanceof WaypointError ? error.code : error instanceof Error ? error.name : 'error';
  const message = error instanceof Error ? error.message : String(error);
  return { runId, sequence: null, step: null, reason: `the run could not be checked (${what}: ${message.replace(/\s+/g, ' ').trim()})` };
}

function renderReport(report: VerifyReport): string {
  const head = `Verified ${report.runs} run(s), ${report.rows} checkpoint row(s) in ${report.store}: `;
  if (report.ok) return `${head}all intact.\n`;
  const runs = new Set(report.corrupted.map((p) => p.runId));
  const rows = report.corrupted.map((p) => [p.runId, p.sequence === null ? 'run row' : String(p.sequence), p.step ?? '', p.reason]);
  const first = new Map<string, number>();
  for (const p of report.corrupted) if (p.sequence !== null && !first.has(p.runId)) first.set(p.runId, p.sequence);
  const advice = [...first].slice(0, 5).map(([runId, sequence]) => `  waypoint-durable runs fork ${runId} --from-sequence ${Math.max(0, sequence - 1)}`);
  return (
    table(['RUN', 'SEQ', 'STEP', 'PROBLEM'], rows, [false, true, false, false]) +
    `\n${head}${report.corrupted.length} corrupted in ${runs.size} run(s).\n` +
    `Restore those rows from a backup, or continue each run from its last good checkpoint:\n${advice.join('\n')}\n`
  );
}

async function inPool<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: Math.min(limit, queue.length) }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(item);
    }),
  );
}
