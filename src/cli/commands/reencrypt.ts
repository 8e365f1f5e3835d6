import { CheckpointCorruptedError, RunNotFoundError } from '../../contract/errors';
import { EncryptingCheckpointStore, type ReencryptReport } from '../../storage/encrypting-store';
import { EXIT, type ExitCode, runNotFound, usageError } from '../exit-codes';
import { corruptionReason } from '../integrity-scan';
import { printJson, table, type CliIo } from '../output';
import { Progress } from '../progress';
import { openSession, type GlobalOptions } from '../session';

/** What `reencrypt --json` prints. */
export interface ReencryptCliReport {
  store: string;
  activeKeyId: string;
  /** Runs read to the end, with their counts. */
  runs: ReencryptReport[];
  /** Runs holding a value no configured key opens (left as it is; the run's other values were rewritten). */
  unreadable: { runId: string; sequence: number; reason: string }[];
  total: { runs: number; rewritten: number; alreadyCurrent: number; skipped: number };
  ok: boolean;
}

/**
 * `waypoint-durable reencrypt [runId...]`: key rotation. Rewrites every payload of every run (or of the given
 * runs) that is not sealed under the active key of the module's `encryption` (see
 * `EncryptingCheckpointStore.reencryptRun`). Prints each run's counts and a total; exit 4 when a value
 * could not be opened, after going through the other runs.
 */
export async function reencrypt(globals: GlobalOptions, runIds: string[], io: CliIo): Promise<ExitCode> {
  const session = await openSession(globals, io, { command: 'reencrypt' });
  try {
    const store = session.waypoint.store;
    if (!(store instanceof EncryptingCheckpointStore)) {
      throw usageError(
        "The reencrypt command needs the encryption keys: give --module whose createWaypointOptions() returns { encryption: { activeKeyId: 'new', keys: { old: ..., new: ... } } }.",
      );
    }
    // Listed through the inner store: the ids only, without opening (or failing on) any payload.
    for (const id of runIds) if (!(await store.inner.getRun(id))) throw runNotFound(id, session.storeDisplay);
    const ids = runIds.length > 0 ? runIds : (await store.inner.listRuns()).map((r) => r.runId);
    const report: ReencryptCliReport = {
      store: session.storeDisplay,
      activeKeyId: store.activeKeyId,
      runs: [],
      unreadable: [],
      total: { runs: 0, rewritten: 0, alreadyCurrent: 0, skipped: 0 },
      ok: true,
    };
    const progress = new Progress(io, 'reencrypt', ids.length, globals.progress !== false);
    for (const id of ids) {
      try {
        const done = await store.reencryptRun(id);
        report.runs.push(done);
        progress.tick(`${id}: ${done.rewritten} rewritten`);
      } catch (error) {
        if (error instanceof RunNotFoundError && runIds.length === 0) continue; // deleted since it was listed
        if (!(error instanceof CheckpointCorruptedError)) throw error;
        report.unreadable.push({ runId: id, sequence: error.sequence, reason: corruptionReason(error.message) });
        progress.tick(`${id}: unreadable`);
      }
    }
    progress.done();
    for (const r of report.runs) {
      report.total.rewritten += r.rewritten;
      report.total.alreadyCurrent += r.alreadyCurrent;
      report.total.skipped += r.skipped;
    }
    report.total.runs = report.runs.length + report.unreadable.length;
    report.ok = report.unreadable.length === 0;
    if (globals.json) printJson(io, report);
    else io.out(render(report, runIds.length === 0));
    return report.ok ? EXIT.OK : EXIT.CORRUPTED;
  } finally {
    await session.close();
  }
}

function render(report: ReencryptCliReport, everyRun: boolean): string {
  const { total } = report;
  let text = '';
  if (report.runs.length > 0) {
    const rows = report.runs.map((r) => [r.runId, String(r.rewritten), String(r.alreadyCurrent), String(r.skipped)]);
    text += table(['RUN', 'REWRITTEN', 'CURRENT', 'SKIPPED'], rows, [false, true, true, true]) + '\n';
  }
  text +=
    `Re-encrypted ${total.runs} run(s) in ${report.store} under key '${report.activeKeyId}': ` +
    `${total.rewritten} value(s) rewritten, ${total.alreadyCurrent} already current, ${total.skipped} skipped.\n`;
  if (total.skipped > 0) text += `${total.skipped} value(s) changed while this ran and were left to their writer: run waypoint-durable reencrypt again to cover them.\n`;
  if (report.unreadable.length > 0) {
    // Sequence 0: the run row or an operation, which the reason names.
    const rows = report.unreadable.map((u) => [u.runId, u.sequence === 0 ? '' : String(u.sequence), u.reason]);
    text +=
      '\n' +
      table(['RUN', 'SEQ', 'PROBLEM'], rows, [false, true, false]) +
      `\n${report.unreadable.length} run(s) hold values no configured key opens; those values were left as they are. ` +
      `Keep the key they name configured (or restore those rows, or fork the runs) before removing any key.\n`;
  } else if (everyRun && total.skipped === 0) {
    text += `Every stored value is sealed under '${report.activeKeyId}': once no process writes with an older key, it can be removed from 'encryption.keys'.\n`;
  }
  return text;
}
