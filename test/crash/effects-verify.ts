import { isDeepStrictEqual } from 'node:util';
import type { Waypoint } from '../../src/index';
import { balance, ledgerRows, type LedgerDb } from '../effects/ledger';
import type { ReceivedRequest } from '../helpers/http-counter';
import { EFFECTS, STEP_KEYS, effectKey, type JournalLine } from './effects-pipeline';

/** How one process of a run ended. */
export interface ProcessLog {
  pid: number;
  /** How the harness meant to kill it (null: left to finish). */
  kill: string | null;
  /** True when it died of SIGKILL. */
  killed: boolean;
  code: number | null;
  /** Its error line, when it exited with one. */
  error?: unknown;
}

/** Everything observed about one run, in process order. */
export interface RunLog {
  runId: string;
  processes: ProcessLog[];
  completed: boolean;
}

/** The verdict on one run; `violations` is empty when every guarantee held. */
export interface RunReport {
  runId: string;
  processes: number;
  kills: number;
  resumes: number;
  /** Plan steps not recorded exactly once. */
  lostSteps: number;
  /** Steps that started again after their checkpoint was durable. */
  rerunSteps: number;
  /** Transactional effects applied more than once (extra rows), and never. */
  duplicateTransactional: number;
  missingTransactional: number;
  /** External deliveries after the first, by cause. */
  externalRepeats: { betweenEffectAndRecord: number; other: number };
  /** Reconcile hook answers (unknown outcomes resolved without repeating the call). */
  reconciled: { found: number; notFound: number };
  violations: string[];
}

export interface VerifyInput {
  log: RunLog;
  reader: Waypoint;
  ledger: LedgerDb;
  /** The POSTs the API received for this run. */
  posts: ReceivedRequest[];
  journal: JournalLine[];
  /** Final state of the same run id, run once without interruption. */
  baseline: unknown;
}

/**
 * Checks a run that was killed and resumed until it completed: no step lost or re-run after its
 * checkpoint, every transactional effect applied exactly once, every external effect received at least
 * once and repeated only with its own key and only after a process was killed between the call and its
 * record, every operation committed, and the final state equal to the uninterrupted run's.
 */
export async function verifyRun({ log, reader, ledger, posts, journal, baseline }: VerifyInput): Promise<RunReport> {
  const { runId } = log;
  const violations: string[] = [];
  const fail = (what: string) => violations.push(`${runId}: ${what}`);
  const killed = new Set(log.processes.filter((p) => p.killed).map((p) => p.pid));
  const order = new Map(log.processes.map((p, i) => [p.pid, i]));
  const report: RunReport = {
    runId,
    processes: log.processes.length,
    kills: killed.size,
    resumes: Math.max(0, log.processes.length - 1),
    lostSteps: 0,
    rerunSteps: 0,
    duplicateTransactional: 0,
    missingTransactional: 0,
    externalRepeats: { betweenEffectAndRecord: 0, other: 0 },
    reconciled: { found: 0, notFound: 0 },
    violations,
  };
  for (const p of log.processes) if (!p.killed && p.code !== 0) fail(`process ${p.pid} failed: ${JSON.stringify(p.error ?? p.code)}`);
  if (!log.completed) fail('never completed');

  // Steps: each recorded once, in plan order, and none started again after its checkpoint.
  const rows = await reader.store.listSteps(runId);
  const recorded = rows.map((r) => `${r.agentId}/${r.stepName}`);
  for (const step of STEP_KEYS) if (recorded.filter((k) => k === step).length !== 1) report.lostSteps += 1;
  if (!isDeepStrictEqual(recorded, [...STEP_KEYS])) fail(`steps recorded ${JSON.stringify(recorded)}`);
  if (
    !isDeepStrictEqual(
      rows.map((r) => r.sequence),
      STEP_KEYS.map((_, i) => i + 1),
    )
  )
    fail('sequences are not 1..n');
  for (const step of STEP_KEYS) {
    const done = journal.filter((e) => e.event === 'checkpointed' && e.step === step).map((e) => order.get(e.pid) ?? -1);
    if (done.length === 0) continue;
    const rerun = journal.filter((e) => e.event === 'step' && e.step === step && (order.get(e.pid) ?? -1) > Math.min(...done));
    if (rerun.length > 0) {
      report.rerunSteps += 1;
      fail(`step ${step} started again after its checkpoint was durable`);
    }
  }

  // Final state.
  if (log.completed) {
    const checkpoint = await reader.checkpoint(runId);
    if (!isDeepStrictEqual(checkpoint.shared_context, baseline))
      fail(`final state differs from the uninterrupted run: ${JSON.stringify(checkpoint.shared_context)} vs ${JSON.stringify(baseline)}`);
  }

  // Operations: every planned effect committed.
  const operations = new Map((await reader.store.listOperations(runId)).map((o) => [o.operationKey, o]));
  for (const effect of EFFECTS) {
    const op = operations.get(effectKey(runId, effect));
    if (op?.state !== 'committed') fail(`${effect.agent}/${effect.step} ${effect.name}#${effect.ordinal} is ${op?.state ?? 'not recorded'}`);
  }

  // Transactional effects: exactly one ledger row each, and the balance they add up to.
  const ledgerByKey = new Map<string, number>();
  for (const row of await ledgerRows(ledger, runId)) ledgerByKey.set(row.op_key, (ledgerByKey.get(row.op_key) ?? 0) + 1);
  const transactional = EFFECTS.filter((e) => e.kind === 'transactional');
  const expectedKeys = new Set(transactional.map((e) => effectKey(runId, e)));
  for (const key of expectedKeys) {
    const n = ledgerByKey.get(key) ?? 0;
    if (n > 1) report.duplicateTransactional += n - 1;
    if (n === 0) report.missingTransactional += 1;
  }
  for (const key of ledgerByKey.keys()) if (!expectedKeys.has(key)) fail(`ledger row with an unexpected key ${key}`);
  if (report.duplicateTransactional > 0) fail(`${report.duplicateTransactional} transactional effect(s) applied twice`);
  if (report.missingTransactional > 0) fail(`${report.missingTransactional} transactional effect(s) never applied`);
  const expectedBalance = transactional.reduce((sum, e) => sum + e.amount!, 0);
  if (log.completed && (await balance(ledger, runId)) !== expectedBalance) fail(`balance ${await balance(ledger, runId)}, expected ${expectedBalance}`);

  // External effects: the right keys only, each at least once, repeats only after a kill before the record.
  const external = classifyExternal(runId, posts, journal, killed);
  report.externalRepeats = external.repeats;
  violations.push(...external.violations);
  for (const e of journal) if (e.event === 'reconcile') report.reconciled[e.found ? 'found' : 'notFound'] += 1;
  return report;
}

/**
 * Judges the deliveries of a run's external effects: every request must carry the key of a planned
 * external effect, each key must arrive at least once, each process may send a key once, and every
 * delivery before the last must come from a process that was killed before it recorded the effect
 * (journaled 'returned'); a reconciled effect is never repeated (its hook answers instead).
 */
export function classifyExternal(
  runId: string,
  posts: readonly Pick<ReceivedRequest, 'key' | 'pid' | 'path'>[],
  journal: readonly JournalLine[],
  killed: ReadonlySet<number>,
): { repeats: RunReport['externalRepeats']; violations: string[] } {
  const violations: string[] = [];
  const fail = (what: string) => violations.push(`${runId}: ${what}`);
  const repeats = { betweenEffectAndRecord: 0, other: 0 };
  const kinds = new Map(EFFECTS.filter((e) => e.kind !== 'transactional').map((e) => [effectKey(runId, e), e.kind]));
  for (const post of posts) if (post.key === null || !kinds.has(post.key)) fail(`request ${post.path} with unexpected key ${post.key}`);
  for (const [key, kind] of kinds) {
    const senders = posts.filter((p) => p.key === key).map((p) => p.pid ?? -1);
    if (senders.length === 0) fail(`external effect ${key.slice(0, 12)} never received`);
    if (new Set(senders).size !== senders.length) fail(`external effect ${key.slice(0, 12)} sent twice by one process`);
    const recordedBy = new Set(journal.filter((e) => e.event === 'returned' && e.key === key).map((e) => e.pid));
    for (const pid of senders.slice(0, -1)) {
      if (killed.has(pid) && !recordedBy.has(pid) && kind === 'external') {
        repeats.betweenEffectAndRecord += 1;
      } else {
        repeats.other += 1;
        fail(
          `${kind} effect ${key.slice(0, 12)} repeated after process ${pid} (${killed.has(pid) ? 'killed' : 'not killed'}, ${recordedBy.has(pid) ? 'recorded it' : 'had not recorded it'})`,
        );
      }
    }
  }
  return { repeats, violations };
}

/** Totals over many runs, as the CLI prints them. */
export interface Totals {
  runs: number;
  processes: number;
  kills: number;
  resumes: number;
  lostSteps: number;
  rerunSteps: number;
  duplicateTransactional: number;
  missingTransactional: number;
  externalRepeats: { betweenEffectAndRecord: number; other: number };
  reconciled: { found: number; notFound: number };
  violations: string[];
}

export function emptyTotals(): Totals {
  return {
    runs: 0,
    processes: 0,
    kills: 0,
    resumes: 0,
    lostSteps: 0,
    rerunSteps: 0,
    duplicateTransactional: 0,
    missingTransactional: 0,
    externalRepeats: { betweenEffectAndRecord: 0, other: 0 },
    reconciled: { found: 0, notFound: 0 },
    violations: [],
  };
}

export function addReport(totals: Totals, report: RunReport): void {
  mergeTotals(totals, { ...report, runs: 1 });
}

/** Adds `from`'s counts (and violations) to `into`. */
export function mergeTotals(into: Totals, from: Totals): void {
  into.runs += from.runs;
  into.processes += from.processes;
  into.kills += from.kills;
  into.resumes += from.resumes;
  into.lostSteps += from.lostSteps;
  into.rerunSteps += from.rerunSteps;
  into.duplicateTransactional += from.duplicateTransactional;
  into.missingTransactional += from.missingTransactional;
  into.externalRepeats.betweenEffectAndRecord += from.externalRepeats.betweenEffectAndRecord;
  into.externalRepeats.other += from.externalRepeats.other;
  into.reconciled.found += from.reconciled.found;
  into.reconciled.notFound += from.reconciled.notFound;
  into.violations.push(...from.violations);
}
