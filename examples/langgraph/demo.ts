/**
 * `node dist/examples/langgraph/demo.js`: a LangGraph.js graph on the Waypoint checkpointer, no network
 * (a fake chat model), two scenes, each across processes:
 *
 * 1. Crash: a worker runs plan -> (market, filings in parallel) -> write and is killed with SIGKILL while
 *    the slow `filings` call is in flight, after `market` finished. A new worker resumes the thread:
 *    `plan` and `market` are not run again (their results are in the checkpoint and its pending writes).
 * 2. Human in the loop: a worker runs until `interrupt()` asks for approval and exits; another process
 *    answers with `Command({ resume })` and the graph finishes. The draft is written once.
 *
 * Every claim is checked; the exit code is 1 if one does not hold. Storage: a fresh SQLite file under
 * ./.waypoint/ (set WAYPOINT_LG_BACKEND=postgres|redis and WAYPOINT_LG_URL to use those).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { type CallRecord, readCalls } from './graphs';
import { saverFromEnv } from './worker';

interface Exit {
  pid: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  lines: string[];
}

interface Worker {
  pid: number;
  exited: Promise<Exit>;
  kill(): void;
}

const failures: string[] = [];
function check(ok: boolean, claim: string): void {
  console.log(`  ${ok ? '✓' : '✗'} ${claim}`);
  if (!ok) failures.push(claim);
}

function startWorker(args: string[], env: NodeJS.ProcessEnv, label: string): Worker {
  const child = spawn(process.execPath, [join(__dirname, 'worker.js'), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let partial = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) {
      lines.push(line);
      if (!/^(RESULT|INTERRUPT) /.test(line)) console.log(`    ${label} ${child.pid} | ${line}`);
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => process.stderr.write(chunk));
  const exited = new Promise<Exit>((done, fail) => {
    child.once('error', fail);
    child.once('close', (code, signal) => done({ pid: child.pid!, code, signal, lines }));
  });
  return { pid: child.pid!, exited, kill: () => child.kill('SIGKILL') };
}

function protocolLine(exit: Exit, kind: 'RESULT' | 'INTERRUPT'): unknown {
  const line = exit.lines.find((l) => l.startsWith(`${kind} `));
  if (!line) throw new Error(`worker ${exit.pid} ended (code ${exit.code}, signal ${exit.signal}) without a ${kind} line`);
  return JSON.parse(line.slice(kind.length + 1));
}

function count(calls: CallRecord[], node: string, event: CallRecord['event']): number {
  return calls.filter((c) => c.node === node && c.event === event).length;
}

async function until(condition: () => Promise<boolean>, what: string, worker: Worker, timeoutMs = 20_000): Promise<void> {
  let ended = false;
  void worker.exited.then(() => (ended = true));
  for (const deadline = Date.now() + timeoutMs; !(await condition());) {
    if (ended) throw new Error(`worker ${worker.pid} exited before ${what}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main(): Promise<number> {
  const started = Date.now();
  const root = resolve('.waypoint');
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, 'langgraph-demo-'));
  const calls = join(dir, 'llm-calls.jsonl');
  const env: NodeJS.ProcessEnv = { ...process.env, WAYPOINT_LG_DB: process.env.WAYPOINT_LG_DB ?? join(dir, 'graph.db'), WAYPOINT_LG_CALLS: calls };
  // The demo reads the checkpoints itself, through its own saver on the same storage.
  const { saver, store } = saverFromEnv(env);
  const threads = ['report-aapl', 'approval-1'];
  try {
    for (const t of threads) await saver.deleteThread(t); // a shared PostgreSQL / Redis may hold an earlier demo's threads
    console.log('LangGraph.js on the Waypoint checkpointer: SIGKILL mid-graph, then human-in-the-loop across processes');
    console.log(`storage: ${env.WAYPOINT_LG_BACKEND ?? 'sqlite'}${env.WAYPOINT_LG_BACKEND ? '' : ` file ${relative(process.cwd(), env.WAYPOINT_LG_DB!)}`}\n`);

    // ---- scene 1: crash and resume ----
    const thread = { configurable: { thread_id: 'report-aapl' } };
    console.log("[1] worker A runs thread 'report-aapl': plan -> (market, filings) -> write");
    const a = startWorker(['report', 'report-aapl'], { ...env, WAYPOINT_LG_FILINGS_MS: '30000' }, 'A');
    // Kill only once market's result is durable: a pending write of the running superstep, in storage.
    await until(
      async () => {
        const tuple = await saver.getTuple(thread);
        return count(readCalls(calls), 'filings', 'call') === 1 && (tuple?.pendingWrites ?? []).some((w) => JSON.stringify(w[2]).includes('Market:'));
      },
      "market's result in the checkpoint",
      a,
    );
    console.log(`  market's result is in storage; filings is still waiting for the model. SIGKILL -> worker A ${a.pid}`);
    a.kill();
    const killed = await a.exited;
    check(killed.signal === 'SIGKILL', `worker A died by SIGKILL (no clean shutdown, ${((Date.now() - started) / 1000).toFixed(1)} s in)`);

    console.log("\n[1] worker B resumes thread 'report-aapl' from its checkpoint");
    const b = await startWorker(['report', 'report-aapl'], env, 'B').exited;
    const report = protocolLine(b, 'RESULT') as { brief: string; notes: number };
    const c1 = readCalls(calls);
    console.log(`  brief: ${report.brief}`);
    console.log(
      `  model calls: plan ${count(c1, 'plan', 'call')}, market ${count(c1, 'market', 'call')}, filings ${count(c1, 'filings', 'call')} (${count(c1, 'filings', 'call') - count(c1, 'filings', 'answer')} cut off by the kill), write ${count(c1, 'write', 'call')}`,
    );
    check(b.code === 0 && report.notes === 4 && report.brief.startsWith('Brief:'), 'worker B finished the graph: 4 notes and the brief');
    check(count(c1, 'plan', 'call') === 1, "'plan' was not run again: its checkpoint was restored");
    check(count(c1, 'market', 'call') === 1, "'market' was not run again: its pending write survived the kill");
    check(count(c1, 'filings', 'call') === 2 && count(c1, 'filings', 'answer') === 1, "only 'filings', in flight at the kill, ran again");

    // ---- scene 2: human in the loop across processes ----
    console.log("\n[2] worker C runs thread 'approval-1' until the graph asks a human");
    const c = await startWorker(['ask', 'approval-1'], env, 'C').exited;
    const question = protocolLine(c, 'INTERRUPT') as { question: string; draft: string };
    console.log(`  asked: ${question.question} ${question.draft}`);
    const waiting = await saver.getTuple({ configurable: { thread_id: 'approval-1' } });
    check(c.code === 0 && question.question === 'Publish this draft?', 'worker C stopped at interrupt() and exited 0');
    check(waiting !== undefined && (waiting.pendingWrites ?? []).some((w) => w[1] === '__interrupt__'), 'the question is stored with the checkpoint');

    const reply = { approved: true, editor: 'dana' };
    console.log(`\n[2] worker D answers with Command({ resume: ${JSON.stringify(reply)} })`);
    const d = await startWorker(['answer', 'approval-1', JSON.stringify(reply)], env, 'D').exited;
    const approved = protocolLine(d, 'RESULT') as { published: boolean; decision: unknown; draft: string };
    check(d.code === 0 && approved.published === true && JSON.stringify(approved.decision) === JSON.stringify(reply), 'worker D resumed the graph with the answer and published');
    check(count(readCalls(calls), 'compose', 'call') === 1, 'the draft was written once, by worker C');

    const kept = failures.length > 0 || process.env.WAYPOINT_LG_KEEP ? `files kept in ${relative(process.cwd(), dir)}` : 'set WAYPOINT_LG_KEEP=1 to keep its files';
    console.log(`\n${failures.length === 0 ? 'All checks passed' : `${failures.length} check(s) failed`} in ${((Date.now() - started) / 1000).toFixed(1)} s (${kept}).`);
    return failures.length === 0 ? 0 : 1;
  } finally {
    if (failures.length === 0 && !process.env.WAYPOINT_LG_KEEP) for (const t of threads) await saver.deleteThread(t);
    await saver.close();
    await store?.close();
    if (failures.length === 0 && !process.env.WAYPOINT_LG_KEEP) rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.stack : err);
    process.exit(1);
  },
);
