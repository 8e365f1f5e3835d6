/**
 * `npm run demo:ai`: an AI SDK tool loop (generateText + tools + stopWhen) made durable by `durableModel`
 * and `durableTools`, across processes. A worker runs the loop and kills itself (SIGKILL) inside a tool
 * call mid-loop; a second worker resumes the run: the model calls and tool calls recorded before the kill
 * are not made again. Meanwhile a reader in the demo's own process follows the run's live output from
 * offset 0 across the kill (`waypoint.stream`): once the killed attempt's retraction is applied, it holds
 * each tool call of the recorded run once. The demo prints what the resume did not repeat, checks it, and
 * exits 1 if a claim does not hold.
 *
 * A mock model by default (no network). WAYPOINT_AI_PROVIDER=openai WAYPOINT_AI_MODEL=gpt-4.1-mini (with
 * its API key) uses a real provider, if its package `@ai-sdk/<provider>` is installed (exit 2 if not).
 * Storage: a fresh SQLite file under ./.waypoint/.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ContainerModule } from 'inversify';
import { TOKENS, Waypoint, sqliteStorage, visibleParts, type Logger, type RunStreamEvent } from 'waypoint-durable';
import { chooseModel } from './agent';

interface Exit {
  pid: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  models: { outcome: 'executed' | 'reused'; inputTokens: number; outputTokens: number }[];
  tools: string[];
  result: { status: string; state: { answer: string; turns: number; totalTokens: number } } | null;
  stderr: string;
}

/** Runs a worker process; `started` is called once it printed its first model call (its run exists then). */
function runWorker(env: NodeJS.ProcessEnv, started?: () => void): Promise<Exit> {
  const child = spawn(process.execPath, [join(__dirname, 'worker.js')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    if (started && out.includes('MODEL ')) started();
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err += chunk));
  return new Promise((done, fail) => {
    child.once('error', fail);
    child.once('close', (code, signal) => {
      const lines = out.split('\n');
      const payload = (prefix: string) => lines.filter((l) => l.startsWith(prefix)).map((l) => l.slice(prefix.length));
      const result = payload('RESULT ')[0];
      done({
        pid: child.pid!,
        code,
        signal,
        models: payload('MODEL ').map((l) => JSON.parse(l) as Exit['models'][number]),
        tools: payload('TOOL '),
        result: result ? (JSON.parse(result) as Exit['result']) : null,
        stderr: err,
      });
    });
  });
}

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** A reader in this process: run `runId`'s live output from offset 0, followed until the run ends (across the kill). */
async function follow(db: string, runId: string): Promise<RunStreamEvent[]> {
  const logger = new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(quiet));
  const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: db }), logger] });
  try {
    const events: RunStreamEvent[] = [];
    for await (const event of waypoint.stream(runId, { from: 0 })) events.push(event);
    return events;
  } finally {
    await waypoint.close();
  }
}

/** A tool result as the demo names its call: `search(<topic>)` (the topic is in the result), or the tool's name. */
function toolLabel(name: string, output: unknown): string {
  const topic = (output as { topic?: unknown } | null)?.topic;
  return name === 'search' && typeof topic === 'string' ? `search(${topic})` : name;
}

const failures: string[] = [];
function check(ok: boolean, claim: string): void {
  console.log(`  ${ok ? '✓' : '✗'} ${claim}`);
  if (!ok) failures.push(claim);
}

const n = (value: number) => value.toLocaleString('en-US');
const tokens = (calls: Exit['models']) => calls.reduce((sum, c) => sum + c.inputTokens + c.outputTokens, 0);

async function main(): Promise<number> {
  const chosen = chooseModel();
  if ('missing' in chosen) {
    console.error(chosen.missing);
    return 2;
  }
  const root = resolve('.waypoint');
  mkdirSync(root, { recursive: true });
  const dir = mkdtempSync(join(root, 'ai-demo-'));
  const killAt = process.env.WAYPOINT_AI_KILL_AT_TOOL ?? '4';
  const env = { ...process.env, WAYPOINT_AI_DB: join(dir, 'research.db'), WAYPOINT_AI_RUN: 'research-1' };
  try {
    console.log(`Durable agents on the Vercel AI SDK: ${chosen.label}`);
    console.log(`\n1. A worker runs the tool loop and is killed (SIGKILL) inside tool call ${killAt}`);
    let reading: Promise<RunStreamEvent[]> | undefined;
    const first = await runWorker({ ...env, WAYPOINT_AI_KILL_AT_TOOL: killAt }, () => {
      reading ??= follow(env.WAYPOINT_AI_DB, env.WAYPOINT_AI_RUN);
    });
    const paid = first.models.filter((m) => m.outcome === 'executed');
    console.log(
      `   worker ${first.pid}: ${first.signal ?? `exit ${first.code}`} after ${paid.length} model call(s) (${n(tokens(paid))} tokens) and tool calls ${first.tools.join(', ')}`,
    );
    if (first.signal !== 'SIGKILL') {
      console.error(first.stderr || 'the loop ended before the kill point (a real model may call fewer tools: lower WAYPOINT_AI_KILL_AT_TOOL)');
      return 1;
    }

    console.log('\n2. A new worker resumes the run');
    const second = await runWorker(env);
    if (!second.result) {
      console.error(second.stderr);
      return 1;
    }
    const reused = second.models.filter((m) => m.outcome === 'reused');
    const repaid = second.models.filter((m) => m.outcome === 'executed');
    console.log(`   worker ${second.pid}: ${second.result.status} after ${second.result.state.turns} turns`);
    console.log(
      `   not repeated: ${reused.length} model call(s), ${n(tokens(reused))} tokens (${n(reused.reduce((s, c) => s + c.inputTokens, 0))} in, ${n(reused.reduce((s, c) => s + c.outputTokens, 0))} out); ${first.tools.length - 1} finished tool call(s) not re-run`,
    );
    console.log(`   paid on resume: ${repaid.length} model call(s), ${n(tokens(repaid))} tokens; tool calls ${second.tools.join(', ') || 'none'}`);
    console.log(`   answer: ${second.result.state.answer}`);
    const events = reading ? await reading : [];
    const outputs = visibleParts(events)
      .map((part) => part.data as { type?: string; toolName?: string; output?: unknown })
      .filter((data) => data.type === 'tool-output');
    const seen = outputs.map((data) => toolLabel(data.toolName ?? '?', data.output));
    const recorded = [...first.tools.slice(0, -1), ...second.tools].map((t) => (t.startsWith('saveNote(') ? 'saveNote' : t));
    const count = (kind: RunStreamEvent['kind']) => events.filter((e) => e.kind === kind).length;
    console.log('\n3. A reader in this process followed the live output from offset 0, across the kill');
    console.log(
      `   ${events.length} events: ${count('part')} parts, ${count('retract')} retraction(s), statuses ${events.flatMap((e) => (e.kind === 'status' ? [e.status] : [])).join(' → ')}`,
    );
    console.log(`   tool results it shows once the retractions are applied: ${seen.join(', ')}`);
    console.log('');
    check(second.result.status === 'completed', 'the resumed run completed');
    check(reused.length === paid.length, `every model call paid for before the kill (${paid.length}) came from the log`);
    check(
      second.tools.length > 0 && second.tools[0] === first.tools[first.tools.length - 1],
      `only the killed tool call (${first.tools[first.tools.length - 1]}) ran again, then the loop went on`,
    );
    check(!second.tools.slice(1).some((t) => first.tools.slice(0, -1).includes(t)), 'no finished tool call ran again');
    check(
      seen.length === recorded.length && seen.every((label, i) => label === recorded[i]),
      "the reader's stream, retractions applied, shows each tool call of the recorded run once, in order",
    );
    const db = join(dir, 'research.db');
    if (process.env.WAYPOINT_AI_KEEP) console.log(`\n  Tokens per step: node dist/src/cli/main.js runs show research-1 --store sqlite:${db}`);
    else console.log('\n  (WAYPOINT_AI_KEEP=1 keeps the database, to see the tokens per step with `waypoint-durable runs show`)');
    return failures.length === 0 ? 0 : 1;
  } finally {
    if (failures.length === 0 && !process.env.WAYPOINT_AI_KEEP) rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  (code) => (process.exitCode = code),
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
