import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceIdentifier } from 'inversify';
import type { StepContext } from 'waypoint-durable';

/** The one thing the agents need from a language model. */
export interface LlmClient {
  complete(prompt: string, call: LlmCall): Promise<string>;
}

/** Who is asking: the run and the step's path (unique within a run), and the step's abort signal. */
export interface LlmCall {
  runId: string;
  path: string;
  signal?: AbortSignal;
}

/** Inversify identifier of the LLM client the agents get injected. */
export const LLM: ServiceIdentifier<LlmClient> = Symbol.for('code-review:LLM');

/**
 * The call a step makes: its run, its path (`parallel[1]/Summarizer/summarize`, `forEach(reviews)[3]/...`)
 * and its abort signal. The path is what the demo's call log is matched against the step rows by.
 *
 * @example
 * const text = await this.llm.complete(prompt, llmCall(ctx));
 */
export function llmCall(ctx: StepContext<unknown>): LlmCall {
  return { runId: ctx.runId, path: ctx.path, signal: ctx.signal };
}

/** One line of the LLM call log. */
export interface LlmCallRecord {
  event: 'start' | 'end';
  runId: string;
  path: string;
  pid: number;
  /** First 12 hex chars of the prompt's SHA-256. */
  prompt: string;
  at: number;
}

/** Settings of {@link FakeLlm}. */
export interface FakeLlmOptions {
  /** Simulated latency per call. Default 150 ms. */
  delayMs?: number;
  /** Append a JSON line per call start and end to this file (shared across processes). */
  logPath?: string;
}

/**
 * A deterministic stand-in for an LLM: the answer is a pure function of the prompt, so a crashed and
 * resumed run ends in the same state as an uninterrupted one. Each call takes `delayMs`, honours its
 * abort signal, and is logged (synchronously, before and after) so another process can see which calls
 * started and ended before a SIGKILL.
 *
 * @example
 * const llm = new FakeLlm({ delayMs: 10, logPath: '/tmp/llm.jsonl' });
 */
export class FakeLlm implements LlmClient {
  private readonly delayMs: number;

  constructor(private readonly options: FakeLlmOptions = {}) {
    this.delayMs = options.delayMs ?? 150;
  }

  async complete(prompt: string, call: LlmCall): Promise<string> {
    const digest = createHash('sha256').update(prompt).digest('hex');
    this.log('start', call, digest);
    if (this.delayMs > 0) await sleep(this.delayMs, undefined, { signal: call.signal });
    this.log('end', call, digest);
    return `${pick(digest, OPENERS)} ${pick(digest.slice(4), CLAIMS)} (ref ${digest.slice(0, 8)})`;
  }

  private log(event: LlmCallRecord['event'], call: LlmCall, digest: string): void {
    if (!this.options.logPath) return;
    const record: LlmCallRecord = { event, runId: call.runId, path: call.path, pid: process.pid, prompt: digest.slice(0, 12), at: Date.now() };
    // Synchronous, so a SIGKILL right after cannot lose the line.
    appendFileSync(this.options.logPath, JSON.stringify(record) + '\n');
  }
}

/**
 * Reads an LLM call log written by {@link FakeLlm}; a missing file is an empty log.
 *
 * @example
 * const started = readCallLog(path).filter((r) => r.event === 'start').length;
 */
export function readCallLog(path: string): LlmCallRecord[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.endsWith('}'))
    .map((line) => JSON.parse(line) as LlmCallRecord);
}

/** A deterministic choice from the digest's hex digits. */
export function pick<T>(digest: string, items: readonly T[]): T {
  return items[parseInt(digest.slice(0, 4), 16) % items.length];
}

const OPENERS = ['Looks sound:', 'Mostly fine:', 'Worth a second look:', 'Noted:'];
const CLAIMS = [
  'the retry path keeps the refund idempotent',
  'error handling covers the timeout case',
  'the new branch needs a test for an empty batch',
  'logging leaks no card data',
  'the API contract is unchanged for existing clients',
];
