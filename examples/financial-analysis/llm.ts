import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ServiceIdentifier } from 'inversify';
import type { StepContext } from 'waypoint-durable';

/** Per-call options of an LLM request. */
export interface LlmCallOptions {
  /** Aborts the request (step timeout, shutdown, lost lease). */
  signal?: AbortSignal;
  /** Who is asking, for the call log: `agentId/stepName`. */
  tag?: string;
}

/** The one thing the agents need from a language model. */
export interface LlmClient {
  complete(prompt: string, options?: LlmCallOptions): Promise<string>;
}

/** Inversify identifier of the LLM client the agents get injected. */
export const LLM: ServiceIdentifier<LlmClient> = Symbol.for('financial-analysis:LLM');

/**
 * The call options a step passes to the LLM: its abort signal and its `agentId/stepName` tag.
 *
 * @example
 * const text = await this.llm.complete(prompt, llmCall(ctx));
 */
export function llmCall(ctx: StepContext<unknown>): LlmCallOptions {
  return { signal: ctx.signal, tag: `${ctx.agentId}/${ctx.stepName}` };
}

/** Settings of {@link FakeLlm}. */
export interface FakeLlmOptions {
  /** Simulated latency per call. Default 150 ms. */
  delayMs?: number;
  /** Append a JSON line per call start / end / abort to this file (shared across processes). */
  logPath?: string;
  /**
   * Keep the first call with this tag in flight until it is aborted (or 60 s pass), so a crash test can
   * kill the process while that call is certainly in flight, without racing the simulated latency.
   */
  holdTag?: string;
}

/** One line of the LLM call log. A call is identified by (pid, call). */
export interface LlmCallRecord {
  event: 'start' | 'end' | 'aborted';
  tag: string;
  pid: number;
  /** Ordinal of the call within its process. */
  call: number;
  /** First 12 hex chars of the prompt's SHA-256: equal prompts, equal ids. */
  prompt: string;
  at: number;
}

/**
 * A deterministic stand-in for an LLM: the answer is a pure function of the prompt (so an interrupted and
 * an uninterrupted run produce the same state), each call takes `delayMs` and honours its abort signal,
 * and every call is appended to a call log so a parent process can count calls across crashes.
 *
 * @example
 * const llm = new FakeLlm({ delayMs: 10, logPath: '/tmp/llm.jsonl' });
 * await llm.complete('List the primary sources for a Q3-2026 earnings analysis of AAPL.');
 */
export class FakeLlm implements LlmClient {
  private calls = 0;
  private held = false;
  private readonly delayMs: number;

  constructor(private readonly options: FakeLlmOptions = {}) {
    this.delayMs = options.delayMs ?? 150;
  }

  async complete(prompt: string, options: LlmCallOptions = {}): Promise<string> {
    const call = ++this.calls;
    const tag = options.tag ?? 'untagged';
    const digest = createHash('sha256').update(prompt).digest();
    this.log('start', tag, call, digest);
    try {
      if (tag === this.options.holdTag && !this.held) {
        this.held = true;
        await holdOpen(options.signal);
      } else {
        await sleep(this.delayMs, undefined, { signal: options.signal });
      }
    } catch (error) {
      this.log('aborted', tag, call, digest);
      throw options.signal?.aborted ? options.signal.reason : error;
    }
    this.log('end', tag, call, digest);
    return answer(prompt, digest);
  }

  private log(event: LlmCallRecord['event'], tag: string, call: number, digest: Buffer): void {
    if (!this.options.logPath) return;
    const record: LlmCallRecord = { event, tag, pid: process.pid, call, prompt: digest.toString('hex', 0, 6), at: Date.now() };
    // Synchronous append: the line is in the file before the call proceeds, so a SIGKILL right after
    // cannot lose it and the parent sees exactly which calls started.
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

function holdOpen(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((_, reject) => {
    // A referenced timer keeps the process alive while held (a bare pending promise would let it exit).
    const timer = setTimeout(() => reject(new Error('FakeLlm: held call was never aborted or killed')), 60_000);
    // the step's abort reason, unchanged, as a real client's abortable call rejects
    signal?.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
}

/** Deterministic numbers drawn from the prompt's digest. */
class Dice {
  private i = 0;
  constructor(private readonly bytes: Buffer) {}
  private next(): number {
    const v = this.bytes.readUInt16BE(this.i % (this.bytes.length - 1));
    this.i += 2;
    return v / 0xffff;
  }
  num(lo: number, hi: number, decimals = 1): number {
    return Number((lo + this.next() * (hi - lo)).toFixed(decimals));
  }
  int(lo: number, hi: number): number {
    return Math.round(this.num(lo, hi, 0));
  }
  pick<T>(items: readonly T[]): T {
    return items[Math.min(items.length - 1, Math.floor(this.next() * items.length))];
  }
}

const OPENERS = ['Overall,', 'On balance,', 'In short,', 'Notably,'];
const CLAIMS = [
  'demand held up better than guided',
  'services mix keeps lifting margins',
  'working capital swung favourably',
  'pricing power offsets input costs',
  'buybacks support per-share growth',
];
const RISKS = ['FX headwinds', 'a slower upgrade cycle', 'regulatory pressure in the EU', 'supply concentration', 'a rich multiple'];

/** Canned answers by task; anything else gets deterministic prose. */
function answer(prompt: string, digest: Buffer): string {
  const d = new Dice(digest);
  // Prompts name the ticker before any other all-caps word.
  const ticker = /\b[A-Z]{2,5}\b/.exec(prompt)?.[0] ?? 'TICKER';
  if (prompt.startsWith('List the primary sources')) {
    return [
      `${ticker} quarterly filing (10-Q)`,
      `${ticker} earnings call transcript`,
      `${d.pick(['Morgan', 'Barclays', 'UBS'])} analyst note`,
      `${d.pick(['IDC', 'Gartner'])} industry report`,
    ]
      .map((s) => `- ${s}`)
      .join('\n');
  }
  if (prompt.startsWith('Extract the key figures')) {
    return JSON.stringify({ revenueBn: d.num(20, 120), grossMarginPct: d.num(30, 70), freeCashFlowBn: d.num(2, 30), eps: d.num(0.5, 8, 2) });
  }
  if (prompt.startsWith('Write a TypeScript valuation model')) {
    const growth = d.num(0.02, 0.12, 3);
    return `export function fairValue(eps: number, pe: number): number {\n  const growth = ${growth};\n  return eps * pe * (1 + growth);\n}\n`;
  }
  if (prompt.startsWith('Run this model')) {
    return JSON.stringify({ revenueGrowthPct: d.num(-5, 25), fcfMarginPct: d.num(5, 35), peRatio: d.num(10, 40), fairValue: d.num(50, 400, 2) });
  }
  if (prompt.startsWith('Give a verdict')) {
    return JSON.stringify({ verdict: d.pick(['pass', 'pass-with-notes']), confidence: d.int(60, 97) });
  }
  return `${d.pick(OPENERS)} ${d.pick(CLAIMS)}; watch ${d.pick(RISKS)}. (${ticker}, ref ${digest.toString('hex', 0, 4)})`;
}
