/**
 * `npm run demo:lifecycle`: the contract-approval pipeline across five processes.
 *
 *   1. worker-1 starts the run and gets a SIGTERM in the middle of the long review: the run pauses
 *      (exit 75), the interrupted step is not recorded;
 *   2. worker-2 resumes: the review runs again, then the run waits for a person (exit 75, nothing runs);
 *   3. a person approves from another process (`waypoint.signal`); a second, late answer is refused;
 *   4. worker-3 resumes with the decision and sends the contract for signature, once.
 *
 * Prints a compact transcript and checks every claim it makes; exits 1 if one does not hold.
 * A fresh SQLite file under ./.waypoint/ holds the run; worker.ts and approve.ts are the processes.
 */
import 'reflect-metadata';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { Waypoint, sqliteStorage, type RunResult } from 'waypoint-durable';
import { pause, runDemoMain } from '../demo-support';
import { readActivity, type ActivityRecord } from './activity';
import { APPROVAL_SIGNAL } from './agents';
import { readEnvelopes } from './esign';
import { ContractApproval, stepKeys } from './pipeline';

const RUN_ID = 'contract-42';
const CLAUSE_MS = 150;
/** SIGTERM lands once the review has finished this many clauses. */
const TERM_AFTER_CLAUSES = 3;

interface Exit {
  pid: number;
  code: number | null;
  stdout: string;
  stderr: string;
  /** The last stdout line, parsed. */
  json: (RunResult & { error?: { code: string | null; message: string }; delivered?: boolean }) | null;
}

function start(script: string, args: string[], env: Record<string, string>): { pid: number; exited: Promise<Exit>; term(): void } {
  const child = spawn(process.execPath, [join(__dirname, script), ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<Exit>((done, fail) => {
    child.once('error', fail);
    child.once('close', (code) => done({ pid: child.pid!, code, stdout, stderr, json: parseLast(stdout) }));
  });
  return { pid: child.pid!, exited, term: () => child.kill('SIGTERM') };
}

async function main(): Promise<number> {
  const started = Date.now();
  const clock = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const root = resolve('.waypoint');
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, 'approval-'));
  const db = join(dir, 'approval.db');
  const activityPath = join(dir, 'activity.jsonl');
  const outbox = join(dir, 'envelopes.jsonl');
  const env = { APPROVAL_DB: db, APPROVAL_OUTBOX: outbox, APPROVAL_ACTIVITY: activityPath, APPROVAL_CLAUSE_MS: String(CLAUSE_MS), WAYPOINT_LOG_LEVEL: 'error' };
  const keys = stepKeys();
  const activity = () => readActivity(activityPath);
  const show = (pid: number) => printActivity(activity().filter((a) => a.pid === pid));

  console.log(`Waypoint lifecycle demo: contract-approval@1.0.0, run '${RUN_ID}', ${keys.length} steps`);
  console.log(`  store SQLite ${relative(process.cwd(), db)}; review ${CLAUSE_MS} ms per clause\n`);

  // 1. SIGTERM in the middle of the review.
  const first = start('worker.js', [RUN_ID], { ...env, APPROVAL_WORKER_ID: 'worker-1' });
  console.log(`[worker-1 pid ${first.pid}] starts the run`);
  let done = false;
  void first.exited.then(() => (done = true));
  const progressOf = (pid: number) => activity().filter((a) => a.pid === pid && a.event === 'progress').length;
  while (!done && progressOf(first.pid) < TERM_AFTER_CLAUSES) await pause(5);
  const termAt = Date.now();
  first.term();
  const exit1 = await first.exited;
  const stoppedMs = Date.now() - termAt;
  show(first.pid);
  console.log(`  ← SIGTERM at ${clock()}: exit ${exit1.code} after ${stoppedMs} ms; ${exit1.stderr.trim().split('\n').pop() ?? ''}`);

  // 2. Resume: the review runs again, then the run waits for legal.
  const second = start('worker.js', [RUN_ID], { ...env, APPROVAL_WORKER_ID: 'worker-2' });
  const exit2 = await second.exited;
  console.log(`[worker-2 pid ${second.pid}] resumes: ${exit2.json?.stepsSkipped ?? '?'} step(s) skipped`);
  show(second.pid);
  const reader = await Waypoint.create({ modules: [sqliteStorage({ path: db })], pipelines: [ContractApproval] });
  const waiting = await reader.get(RUN_ID);
  console.log(`  ← ${waiting?.status} at ${clock()}: exit ${exit2.code}; no process runs while legal decides`);
  console.log(`    hint: ${waiting?.resumeHint}`);

  // 3. A person answers from another process; a second answer comes too late.
  const decision = ['approve', 'dana@legal.example', 'liability cap accepted; exclusivity limited to 24 months'];
  const approval = await start('approve.js', [RUN_ID, ...decision], env).exited;
  console.log(`[approver pid ${approval.pid}] waypoint.signal('${RUN_ID}', '${APPROVAL_SIGNAL}', approve by ${decision[1]}) → delivered: ${approval.json?.delivered}`);
  const late = await start('approve.js', [RUN_ID, 'reject', 'sam@legal.example'], env).exited;
  console.log(`[approver pid ${late.pid}] a later 'reject' by sam@legal.example → delivered: ${late.json?.delivered} (the first answer stands)`);

  // 4. Resume with the decision; the contract goes out once.
  const third = start('worker.js', [RUN_ID], { ...env, APPROVAL_WORKER_ID: 'worker-3' });
  const exit3 = await third.exited;
  console.log(`[worker-3 pid ${third.pid}] resumes: ${exit3.json?.stepsSkipped ?? '?'} step(s) skipped`);
  show(third.pid);
  console.log(`  ← ${exit3.json?.status ?? `failed: ${exit3.json?.error?.message ?? exit3.stderr}`} at ${clock()}: exit ${exit3.code}\n`);

  const rows = await reader.store.listSteps(RUN_ID);
  const final = await reader.get(RUN_ID);
  const operations = await reader.store.listOperations(RUN_ID);
  await reader.close();
  const all = activity();
  const starts = (step: string, event: ActivityRecord['event'] = 'start') => all.filter((a) => a.step === step && a.event === event);
  const review = 'ReviewAgent/assessRisk';
  const sent = readEnvelopes(outbox).filter((e) => e.status === 'sent');
  const state = exit3.json?.state as { decision?: { by: string }; envelope?: { envelopeId: string } } | undefined;

  const checks: [boolean, string][] = [
    [
      exit1.code === 75 && exit1.json?.status === 'paused' && exit1.json.lastSequence === 1 && stoppedMs < 2_000,
      `SIGTERM paused the run at sequence 1 with exit 75, ${stoppedMs} ms after the signal`,
    ],
    [
      starts(review, 'aborted').filter((a) => a.pid === first.pid).length === 1 && !starts(review, 'done').some((a) => a.pid === first.pid),
      `the review honoured its abort signal (${starts(review, 'aborted')[0]?.detail ?? 'not aborted'}) and was not recorded`,
    ],
    [
      exit2.code === 75 && exit2.json?.status === 'waiting' && exit2.json.stepsSkipped === 1 && starts(review, 'done').length === 1,
      'the resume skipped the intake, ran the review again from its first clause, and left the run waiting (exit 75)',
    ],
    [approval.json?.delivered === true && late.json?.delivered === false, 'the approval came from another process; a second answer was refused'],
    [
      exit3.code === 0 && exit3.json?.status === 'completed' && exit3.json.stepsSkipped === 2 && state?.decision?.by === decision[1],
      `the last resume continued with ${decision[1]}'s decision and completed (exit 0)`,
    ],
    [
      rows.length === keys.length && rows.every((r, i) => r.sequence === i + 1 && `${r.agentId}/${r.stepName}` === keys[i]),
      `${rows.length} step rows, sequences 1..${rows.length}, each step recorded once`,
    ],
    [
      starts('IntakeAgent/extractTerms', 'done').length === 1 && starts(review).length === 2 && starts('ApprovalAgent/requestApproval', 'waiting').length === 2,
      'intake ran once; the review twice (once interrupted); the approval step twice (once waiting, once answered)',
    ],
    [
      sent.length === 1 && sent[0].envelopeId === state?.envelope?.envelopeId && operations.filter((o) => o.name === 'send-envelope' && o.state === 'committed').length === 1,
      `the contract was sent for signature exactly once (${sent[0]?.envelopeId ?? 'none'})`,
    ],
    [final?.status === 'completed' && final.leaseOwner === null, 'the run is completed and holds no lease'],
  ];
  console.log('Checks');
  for (const [ok, text] of checks) console.log(`  ${ok ? '✓' : '✗ FAILED:'} ${text}`);
  const failed = checks.filter(([ok]) => !ok).length;
  console.log(
    failed === 0
      ? `\nAll checks passed in ${clock()}. Files kept in ${relative(process.cwd(), dir)}.`
      : `\n${failed} check(s) failed. Files kept in ${relative(process.cwd(), dir)}.`,
  );
  return failed === 0 ? 0 : 1;
}

/** One line per step of a process: its last word, with the review's progress folded into a count. */
function printActivity(records: ActivityRecord[]): void {
  const steps = [...new Set(records.map((r) => r.step))];
  const width = 30;
  for (const step of steps) {
    const own = records.filter((r) => r.step === step);
    const clauses = own.filter((r) => r.event === 'progress').length;
    const last = own.filter((r) => r.event !== 'progress' && r.event !== 'start').pop();
    const parts = [clauses > 0 ? `reviewed ${clauses} clause(s)` : '', last ? `${last.event === 'done' ? '' : `${last.event}: `}${last.detail}` : ''].filter(Boolean);
    console.log(`    ${step.padEnd(width)} ${parts.join('; ')}`);
  }
}

function parseLast(stdout: string): Exit['json'] {
  try {
    return JSON.parse(stdout.trim().split('\n').pop() ?? '') as Exit['json'];
  } catch {
    return null;
  }
}

runDemoMain(main);
