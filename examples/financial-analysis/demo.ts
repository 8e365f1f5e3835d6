/**
 * `npm run demo`: the financial-analysis pipeline is killed with SIGKILL in the middle of its third agent
 * and resumed by another process. The demo prints what was skipped, what ran again and why, checks
 * every guarantee it shows, and exits non-zero if one does not hold.
 *
 * A fresh SQLite file under ./.waypoint/ holds the run; worker.ts runs it in child processes.
 */
import 'reflect-metadata';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { Waypoint, memoryStorage, sqliteStorage } from 'waypoint-durable';
import { parseResult, pause, runDemoMain, startWorkerProcess, type WorkerProcess } from '../demo-support';
import { readCallLog, type LlmCallRecord } from './llm';
import { readOutbox } from './mailer';
import { DEMO_INPUT, FinancialAnalysis, exampleModule, stepKeys } from './pipeline';

const RUN_ID = 'q3-aapl';
/** The kill lands while this step's LLM call is in flight (the third agent's second step). */
const TARGET = 'ValidationAgent/reviewModel';
const LLM_DELAY_MS = 150;
const LEASE_TTL_MS = 2000;

function startWorker(env: Record<string, string | undefined>): WorkerProcess {
  return startWorkerProcess(join(__dirname, 'worker.js'), [RUN_ID], env);
}

async function main(): Promise<number> {
  const started = Date.now();
  const seconds = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  const root = resolve('.waypoint');
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, 'demo-'));
  const db = join(dir, 'demo.db');
  const log = join(dir, 'llm-calls.jsonl');
  const outbox = join(dir, 'outbox.jsonl');
  const keys = stepKeys();
  const env = {
    WAYPOINT_DB: db,
    WAYPOINT_LLM_LOG: log,
    WAYPOINT_OUTBOX: outbox,
    WAYPOINT_LLM_DELAY_MS: String(LLM_DELAY_MS),
    WAYPOINT_LEASE_TTL_MS: String(LEASE_TTL_MS),
    WAYPOINT_LOG_LEVEL: 'error',
    WAYPOINT_PG_URL: undefined,
    WAYPOINT_FAULT: undefined,
    WAYPOINT_LLM_HOLD: undefined,
  };

  console.log(`Waypoint demo: pipeline financial-analysis@2.1.0, run '${RUN_ID}', ${keys.length} steps in ${new Set(keys.map((k) => k.split('/')[0])).size} agents`);
  console.log(`  store  SQLite ${relative(process.cwd(), db)}`);
  console.log(`  LLM    deterministic fake, ${LLM_DELAY_MS} ms per call, call log ${relative(process.cwd(), log)}\n`);

  // Run 1: watch the call log and kill the worker as soon as the target step's LLM call has started.
  const first = startWorker(env);
  console.log(`> worker-1 (pid ${first.pid}) starts the run`);
  let done = false;
  void first.exited.then(() => (done = true));
  while (!done && !readCallLog(log).some((c) => c.pid === first.pid && c.tag === TARGET && c.event === 'start')) await pause(2);
  first.kill();
  const killed = await first.exited;
  const reader = await Waypoint.create({ modules: [sqliteStorage({ path: db })] });
  const before = (await reader.store.listSteps(RUN_ID)).length;
  console.log(`x SIGKILL at ${seconds()}: ${before} steps checkpointed, ${TARGET}'s LLM call in flight`);

  // Run 2: a restart on this host takes the dead worker's lease over at once (it fails fast if it could not).
  const second = startWorker({ ...env, WAYPOINT_WAIT_FOR_LOCK_MS: '0' });
  console.log(`> worker-2 (pid ${second.pid}) takes the run over at once: worker-1's process is dead on this host, so its ${LEASE_TTL_MS / 1000} s lease is void`);
  const resumed = await second.exited;
  const result = parseResult(resumed.stdout);
  console.log(`${result?.status === 'completed' ? '+' : 'x'} ${result?.status ?? `worker-2 failed (code ${resumed.code})`} at ${seconds()}\n`);

  const calls = readCallLog(log);
  const rows = await reader.store.listSteps(RUN_ID);
  const operations = await reader.store.listOperations(RUN_ID);
  const stored = await reader.checkpoint(RUN_ID).catch(() => null);
  await reader.close();
  const baseline = await uninterruptedState();
  printTable(keys, before, calls, first.pid, second.pid);

  const run1 = calls.filter((c) => c.pid === first.pid);
  const run2 = calls.filter((c) => c.pid === second.pid);
  const finishedInRun1 = new Set(run1.filter((c) => c.event === 'end').map((c) => c.tag));
  const startedInRun2 = run2.filter((c) => c.event === 'start').map((c) => c.tag);
  const repeated = startedInRun2.filter((tag) => run1.some((c) => c.tag === tag && c.event === 'start'));
  const delivered = readOutbox(outbox).filter((e) => e.status === 'delivered');
  const skipped = result?.stepsSkipped ?? 0;
  const executed = result?.stepsExecuted ?? 0;

  const checks: [boolean, string][] = [
    [
      killed.signal === 'SIGKILL' && before === keys.indexOf(TARGET) && !finishedInRun1.has(TARGET),
      `worker-1 killed with SIGKILL during ${TARGET}'s LLM call, after ${before} checkpointed steps`,
    ],
    [
      result?.status === 'completed' && skipped === before && executed === keys.length - before,
      `steps: ${before} completed before the crash, ${skipped} skipped on resume, ${executed} run after`,
    ],
    [
      rows.length === keys.length && rows.every((r, i) => r.sequence === i + 1 && `${r.agentId}/${r.stepName}` === keys[i]),
      `${rows.length} step rows, sequences 1..${rows.length} without gaps, each step recorded once`,
    ],
    [
      run1.filter((c) => c.event === 'start').length === before + 1 && startedInRun2.length === keys.length - before,
      `LLM calls: ${run1.filter((c) => c.event === 'start').length} before the crash (${finishedInRun1.size} finished, 1 in flight), ${startedInRun2.length} after`,
    ],
    [
      startedInRun2.every((tag) => !finishedInRun1.has(tag)) && repeated.length === 1 && repeated[0] === TARGET,
      `no completed step's LLM call was repeated; only the in-flight call (${TARGET}) ran again`,
    ],
    [
      delivered.length === 1 && operations.length === 1 && operations[0].state === 'committed',
      `report email sent once (${delivered.length} message in the outbox, operation '${operations[0]?.name}' ${operations[0]?.state ?? 'missing'})`,
    ],
    [stored !== null && isDeepStrictEqual(stored.shared_context, baseline), 'final state equals an uninterrupted run of the same input'],
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

function printTable(keys: string[], before: number, calls: LlmCallRecord[], pid1: number, pid2: number): void {
  const width = Math.max(...keys.map((k) => k.length));
  const row = (seq: string, step: string, w1: string, w2: string, llm: string) => `  ${seq.padStart(3)}  ${step.padEnd(width)}  ${w1.padEnd(18)}  ${w2.padEnd(12)}  ${llm}`;
  console.log(row('seq', 'step', 'worker-1', 'worker-2', 'LLM calls'));
  keys.forEach((key, i) => {
    const starts = (pid: number) => calls.filter((c) => c.pid === pid && c.tag === key && c.event === 'start').length;
    const inFlight = i === before;
    const w1 = i < before ? 'done' : inFlight ? 'killed mid-call' : '-';
    const w2 = i < before ? 'skipped' : starts(pid2) > 0 ? (key.endsWith('deliverReport') ? 'ran, emailed' : 'ran') : 'not run';
    const total = starts(pid1) + starts(pid2);
    console.log(row(String(i + 1), key, w1, w2, inFlight ? `${total} (first one killed)` : String(total)));
  });
}

/** The final state of the same input, run once without interruption in this process (memory store). */
async function uninterruptedState(): Promise<unknown> {
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-demo-'));
  const waypoint = await Waypoint.create({ modules: [exampleModule({ llm: { delayMs: 0 }, outboxPath: join(dir, 'outbox.jsonl') }), memoryStorage()] });
  try {
    // A JSON round trip, as the stored state had: plain objects, same prototypes.
    return JSON.parse(JSON.stringify((await waypoint.run(FinancialAnalysis, { runId: RUN_ID, input: { ...DEMO_INPUT } })).state)) as unknown;
  } finally {
    await waypoint.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

runDemoMain(main);
