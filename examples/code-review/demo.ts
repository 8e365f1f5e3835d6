/**
 * `npm run demo:graph`: the code-review pipeline (parallel, loop, branch, forEach over an agent and over a
 * child pipeline) is killed with SIGKILL twice: once while the research branches of its `parallel` are in
 * flight, once in the middle of its `forEach` over files. Each time another process resumes it. The demo
 * prints, step path by step path, what each worker ran and what it skipped because it was recorded,
 * checks every guarantee it shows, and exits non-zero if one does not hold.
 *
 * A fresh SQLite file under ./.waypoint/ holds the run; worker.ts runs it in child processes.
 */
import 'reflect-metadata';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Waypoint, memoryStorage, sqliteStorage, type StepRecord } from 'waypoint-durable';
import { parseResult, pause, runDemoMain, startWorkerProcess, type WorkerExit, type WorkerProcess } from '../demo-support';
import { readCallLog, type LlmCallRecord } from './llm';
import { readOutbox } from './outbox';
import { CodeReview, DEMO_INPUT, exampleModule } from './pipeline';

const RUN_ID = 'pr-481';
const LLM_DELAY_MS = 150;
const LEASE_TTL_MS = 2000;
/** Kill 1 lands once both of these LLM calls have started: the second steps of branches 0 and 1. */
const PARALLEL_TARGETS = ['parallel[0]/WebResearch/readPages', 'parallel[1]/Summarizer/summarize'];
/** Kill 2 lands when the item with this index starts (concurrency 3: at least two items are recorded by then). */
const FOREACH_TARGET = 4;
const SYSTEM_AGENT = '$waypoint';

function startWorker(env: Record<string, string | undefined>): WorkerProcess {
  return startWorkerProcess(join(__dirname, 'worker.js'), [RUN_ID], env);
}

/** Kills `child` as soon as `ready(log)` holds (or returns when the child exits first). */
async function killWhen(child: WorkerProcess, log: string, ready: (calls: LlmCallRecord[]) => boolean): Promise<WorkerExit> {
  let done = false;
  void child.exited.then(() => (done = true));
  while (!done && !ready(readCallLog(log).filter((c) => c.pid === child.pid))) await pause(2);
  child.kill();
  return child.exited;
}

/** A row's path: its own, or `agentId/stepName` for a top-level step. */
function pathOf(row: StepRecord): string {
  return row.path ?? `${row.agentId}/${row.stepName}`;
}

const isDecision = (row: StepRecord) => row.agentId === SYSTEM_AGENT && row.stepName === 'decision';
const isStep = (row: StepRecord) => row.agentId !== SYSTEM_AGENT;

async function main(): Promise<number> {
  const started = Date.now();
  const seconds = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const root = resolve('.waypoint');
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, 'graph-'));
  const db = join(dir, 'code-review.db');
  const log = join(dir, 'llm-calls.jsonl');
  const outbox = join(dir, 'outbox.jsonl');
  const env = {
    WAYPOINT_DB: db,
    WAYPOINT_LLM_LOG: log,
    WAYPOINT_OUTBOX: outbox,
    WAYPOINT_LLM_DELAY_MS: String(LLM_DELAY_MS),
    WAYPOINT_LEASE_TTL_MS: String(LEASE_TTL_MS),
    WAYPOINT_LOG_LEVEL: 'error',
    WAYPOINT_PG_URL: undefined,
    WAYPOINT_FAULT: undefined,
  };
  const reader = await Waypoint.create({ modules: [exampleModule({ outboxPath: join(dir, 'unused.jsonl') }), sqliteStorage({ path: db })], pipelines: [CodeReview] });
  const rowsNow = async () => reader.store.listSteps(RUN_ID);

  console.log(`Waypoint demo:graph: pipeline code-review@1.0.0, run '${RUN_ID}'`);
  console.log('  Planner -> parallel(WebResearch, [DocsResearch, Summarizer], ApiResearch) -> loop(CodeGen, Validate) until tests pass');
  console.log('  -> branch(risk: high -> [SecurityReview, Escalate]) -> forEach(files, FileReviewer, 3 at a time)');
  console.log('  -> forEach(customers, CustomerReport child pipeline, 2 at a time) -> Publisher (emails, a @SideEffect)');
  console.log(`  store  SQLite ${relative(process.cwd(), db)}`);
  console.log(`  LLM    deterministic fake, ${LLM_DELAY_MS} ms per call, call log ${relative(process.cwd(), log)}\n`);

  // Worker 1: killed once branches 0 and 1 of the parallel have both started their second step.
  const w1 = startWorker(env);
  console.log(`> worker-1 (pid ${w1.pid}) starts the run`);
  const exit1 = await killWhen(w1, log, (calls) => PARALLEL_TARGETS.every((path) => calls.some((c) => c.path === path && c.event === 'start')));
  const rows1 = await rowsNow();
  const inFlight1 = unrecordedStarts(readCallLog(log), w1.pid, rows1);
  console.log(
    `x worker-1 ended by ${exit1.signal ?? `exit code ${exit1.code}`} at ${seconds()}: ${rows1.filter(isStep).length} steps recorded; cut off: ${describeCutOff(inFlight1, w1.pid, log)}`,
  );

  // Worker 2: takes worker-1's lease over at once (its process is dead on this host); killed mid-forEach.
  const w2 = startWorker({ ...env, WAYPOINT_WAIT_FOR_LOCK_MS: '0' });
  console.log(`> worker-2 (pid ${w2.pid}) takes the run over at once: worker-1's process is dead on this host, so its ${LEASE_TTL_MS / 1000} s lease is void`);
  const exit2 = await killWhen(w2, log, (calls) => calls.some((c) => c.path === `forEach(reviews)[${FOREACH_TARGET}]/FileReviewer/review` && c.event === 'start'));
  const rows2 = await rowsNow();
  const inFlight2 = unrecordedStarts(readCallLog(log), w2.pid, rows2);
  const itemsDone = rows2.filter((r) => pathOf(r).startsWith('forEach(reviews)[')).length;
  console.log(
    `x worker-2 ended by ${exit2.signal ?? `exit code ${exit2.code}`} at ${seconds()}: ${itemsDone} of 8 file reviews recorded; cut off: ${describeCutOff(inFlight2, w2.pid, log)}`,
  );

  // Worker 3: resumes and finishes (the child runs, the emails).
  const w3 = startWorker({ ...env, WAYPOINT_WAIT_FOR_LOCK_MS: '0' });
  console.log(`> worker-3 (pid ${w3.pid}) resumes it`);
  const exit3 = await w3.exited;
  const result = parseResult(exit3.stdout);
  console.log(`${result?.status === 'completed' ? '+' : 'x'} ${result?.status ?? `worker-3 failed (code ${exit3.code})`} at ${seconds()}\n`);

  const rows = await rowsNow();
  const calls = readCallLog(log);
  const children = await reader.list({ parentRunId: RUN_ID });
  const operations = await reader.store.listOperations(RUN_ID);
  const stored = await reader.checkpoint(RUN_ID).catch(() => null);
  await reader.close();
  const baseline = await uninterruptedState();

  const workers = [
    { name: 'worker-1', pid: w1.pid, before: 0, after: rows1.length },
    { name: 'worker-2', pid: w2.pid, before: rows1.length, after: rows2.length },
    { name: 'worker-3', pid: w3.pid, before: rows2.length, after: rows.length },
  ];
  printTable(rows, calls, workers);
  console.log(`\n  child runs of '${RUN_ID}' (forEach(reports)), run by worker-3:`);
  for (const child of [...children].sort((a, b) => a.runId.localeCompare(b.runId))) console.log(`    ${child.runId}  ${child.pipeline}  ${child.status}`);

  // What the checks compare.
  const parentCalls = calls.filter((c) => c.runId === RUN_ID);
  const repeatedAfterRecord = workers.flatMap((w, k) => {
    const recordedBefore = new Set(rows.slice(0, w.before).filter(isStep).map(pathOf));
    return k === 0 ? [] : parentCalls.filter((c) => c.pid === w.pid && c.event === 'start' && recordedBefore.has(c.path)).map((c) => c.path);
  });
  const startsByPath = new Map<string, number>();
  for (const c of calls.filter((c) => c.event === 'start')) startsByPath.set(`${c.runId} ${c.path}`, (startsByPath.get(`${c.runId} ${c.path}`) ?? 0) + 1);
  const killedCalls = new Set([...inFlight1, ...inFlight2].map((p) => `${RUN_ID} ${p}`));
  const twice = [...startsByPath].filter(([, n]) => n > 1).map(([key]) => key);
  const paths = rows.map(pathOf);
  const delivered = readOutbox(outbox).filter((e) => e.status === 'delivered');
  const recipients = delivered.map((e) => e.to).sort();
  const expectedRecipients = ['globex@customers.example.com', 'initech@customers.example.com', 'team@acme.dev', 'umbrella@customers.example.com'];
  const stepsBefore3 = rows2.filter(isStep).length;
  const parallelInFlight = inFlight1.filter((p) => p.startsWith('parallel['));

  const checks: [boolean, string][] = [
    [
      exit1.signal === 'SIGKILL' && parallelInFlight.length >= 2 && rows1.some((r) => pathOf(r).startsWith('parallel[')),
      `worker-1 killed with SIGKILL mid-parallel: ${rows1.filter((r) => pathOf(r).startsWith('parallel[')).length} branch steps recorded, ${parallelInFlight.length} in flight`,
    ],
    [
      exit2.signal === 'SIGKILL' && itemsDone >= 2 && itemsDone < 8 && inFlight2.some((p) => p.startsWith('forEach(reviews)[')),
      `worker-2 killed with SIGKILL mid-forEach: ${itemsDone} of 8 items recorded, ${inFlight2.length} in flight`,
    ],
    [
      result?.status === 'completed' && result.stepsSkipped === stepsBefore3,
      `worker-3 completed the run, reusing the ${result?.stepsSkipped ?? '?'} steps recorded before it (${stepsBefore3} recorded) and running ${result?.stepsExecuted ?? '?'}`,
    ],
    [new Set(paths).size === paths.length, `${rows.length} rows (${rows.filter(isDecision).length} decisions), each path recorded once`],
    [repeatedAfterRecord.length === 0, `no completed step's LLM call was repeated${repeatedAfterRecord.length ? `: ${repeatedAfterRecord.join(', ')}` : ''}`],
    [
      twice.every((key) => killedCalls.has(key) && startsByPath.get(key) === 2),
      `only the ${twice.length} calls cut off by a kill ran again (once each)${twice.some((k) => !killedCalls.has(k)) ? `; also: ${twice.filter((k) => !killedCalls.has(k)).join(', ')}` : ''}`,
    ],
    [
      isDeepStrictEqual(recipients, expectedRecipients) && operations.length === 4 && operations.every((o) => o.state === 'committed'),
      `${delivered.length} emails in the outbox, one per recipient (${operations.filter((o) => o.state === 'committed').length} operations committed)`,
    ],
    [stored !== null && isDeepStrictEqual(stored.shared_context, baseline), 'final state equals an uninterrupted run of the same input (memory store, in this process)'],
    [
      children.length === 3 &&
        children.every((c, i) => c.status === 'completed' && c.pipeline === 'customer-report' && [...children].map((x) => x.runId).sort()[i] === `${RUN_ID}/reports/${i}`),
      `${children.length} child runs listed under '${RUN_ID}' (waypoint.list({ parentRunId })), all completed`,
    ],
  ];
  console.log('\nChecks');
  for (const [ok, text] of checks) console.log(`  ${ok ? '✓' : '✗ FAILED:'} ${text}`);
  const failed = checks.filter(([ok]) => !ok).length;
  console.log(
    failed === 0
      ? `\nAll checks passed in ${seconds()}. Files kept in ${relative(process.cwd(), dir)}.`
      : `\n${failed} check(s) failed. Files kept in ${relative(process.cwd(), dir)}.`,
  );
  return failed === 0 ? 0 : 1;
}

/** Paths of the parent run whose LLM call `pid` started but whose step was not recorded: cut off by the kill. */
function unrecordedStarts(calls: LlmCallRecord[], pid: number, rows: StepRecord[]): string[] {
  const recorded = new Set(rows.map(pathOf));
  return calls.filter((c) => c.pid === pid && c.runId === RUN_ID && c.event === 'start' && !recorded.has(c.path)).map((c) => c.path);
}

/** The cut-off paths, each marked when its LLM call had ended but its record was not committed yet. */
function describeCutOff(paths: string[], pid: number, log: string): string {
  const ended = new Set(
    readCallLog(log)
      .filter((c) => c.pid === pid && c.runId === RUN_ID && c.event === 'end')
      .map((c) => c.path),
  );
  return paths.map((p) => (ended.has(p) ? `${p} (call ended, not yet recorded)` : p)).join(', ') || 'none';
}

interface WorkerSpan {
  name: string;
  pid: number;
  /** Rows recorded before it started / when it ended. */
  before: number;
  after: number;
}

/** One line per recorded path: what each worker did with it, and how many LLM calls it took in all. */
function printTable(rows: StepRecord[], calls: LlmCallRecord[], workers: WorkerSpan[]): void {
  const width = Math.max(...rows.map((r) => pathOf(r).length + (isDecision(r) ? 11 : 0)));
  const line = (seq: string, path: string, cells: string[], llm: string) => `  ${seq.padStart(3)}  ${path.padEnd(width)}  ${cells.map((c) => c.padEnd(18)).join(' ')} ${llm}`;
  console.log(
    line(
      'seq',
      'path',
      workers.map((w) => w.name),
      'LLM calls',
    ),
  );
  rows.forEach((row, i) => {
    const path = pathOf(row);
    const count = (pid: number, event: LlmCallRecord['event']) => calls.filter((c) => c.pid === pid && c.runId === RUN_ID && c.path === path && c.event === event).length;
    const starts = (pid: number) => count(pid, 'start');
    const ends = (pid: number) => count(pid, 'end');
    const cells = workers.map((w) => {
      if (i < w.before) return 'skipped';
      if (i < w.after) return isDecision(row) ? 'decided' : row.status === 'skipped' ? 'when: no' : 'ran';
      if (starts(w.pid) === 0) return '-';
      return ends(w.pid) > 0 ? 'killed, unrecorded' : 'killed mid-call';
    });
    const total = workers.reduce((n, w) => n + starts(w.pid), 0);
    console.log(line(String(row.sequence), isDecision(row) ? `${path} (decision)` : path, cells, isDecision(row) || row.status === 'skipped' ? '' : String(total)));
  });
}

/** The final state of the same input, run once without interruption in this process (memory store). */
async function uninterruptedState(): Promise<unknown> {
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-graph-'));
  const waypoint = await Waypoint.create({ modules: [exampleModule({ llm: { delayMs: 0 }, outboxPath: join(dir, 'outbox.jsonl') }), memoryStorage()], pipelines: [CodeReview] });
  try {
    // A JSON round trip, as the stored state had: plain objects, same prototypes.
    return JSON.parse(JSON.stringify((await waypoint.run(CodeReview, { runId: RUN_ID, input: { ...DEMO_INPUT } })).state)) as unknown;
  } finally {
    await waypoint.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

runDemoMain(main);
