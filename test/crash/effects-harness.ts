import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ContainerModule } from 'inversify';
import { RUNTIME_FAULT_POINTS, TOKENS, Waypoint, type Logger } from '../../src/index';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { ledgerTables, sqliteLedger, type LedgerDb } from '../effects/ledger';
import { lastJsonLine, spawnNode, waitForLine, type ChildExit } from '../helpers/child-process';
import { HttpCounter } from '../helpers/http-counter';
import { EFFECTS, EffectsPipeline, Journal, STEP_KEYS, effectsPipelineModule } from './effects-pipeline';
import { addReport, emptyTotals, verifyRun, type ProcessLog, type RunLog, type RunReport, type Totals } from './effects-verify';
import { inPool } from './harness';
import { seedFor, seeded, type Random } from './prng';
import { Ticker, tickingStore } from './ticking-store';

/** The compiled worker, next to this file (dist-NAME/test/crash/). */
export const EFFECTS_WORKER = resolve(__dirname, 'effects-worker.js');

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** How the harness kills one process: at the Nth counted point, at a named fault point, or after a delay. */
export type Kill = { kind: 'tick'; tick: number } | { kind: 'fault'; spec: string } | { kind: 'time'; afterMs: number };

export function describeKill(kill: Kill): string {
  return kill.kind === 'tick' ? `tick:${kill.tick}` : kill.kind === 'fault' ? `fault:${kill.spec}` : `time:${kill.afterMs}ms`;
}

/** One isolated database, as the workers (env) and the harness (module, ledger) reach it. */
export interface EffectsDatabase {
  env: Record<string, string | undefined>;
  ledger: LedgerDb;
  storage(): ContainerModule;
  dispose(): Promise<void>;
}

export interface EffectsBackend {
  name: string;
  open(label: string, dir: string): Promise<EffectsDatabase>;
}

/**
 * The same runs executed once each, uninterrupted, in this process on a SQLite file and an API of their
 * own: the final states the crashed runs must end with. Also counts the points (ticks) a fresh run
 * passes and how long it takes, which bound the random kills.
 */
export class Baseline {
  private readonly cache = new Map<string, Promise<{ state: unknown; ticks: number; durationMs: number }>>();
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly dir: string,
    private readonly api: HttpCounter,
    private readonly ledger: LedgerDb,
    private readonly waypoint: Waypoint,
    private readonly ticker: Ticker,
  ) {}

  static async start(): Promise<Baseline> {
    const dir = mkdtempSync(join(tmpdir(), 'waypoint-effects-baseline-'));
    const path = join(dir, 'baseline.db');
    const api = await HttpCounter.start();
    const ledger = sqliteLedger(path);
    const ticker = new Ticker(0);
    const store = new TypeOrmCheckpointStore({ type: 'sqlite', path, synchronous: 'NORMAL' });
    const waypoint = await Waypoint.create({
      modules: [
        new ContainerModule(({ bind }) => {
          bind(TOKENS.CheckpointStore).toConstantValue(tickingStore(store, ticker.tick));
          bind(TOKENS.Logger).toConstantValue(silent);
        }),
        effectsPipelineModule({ httpUrl: api.url, ledger: ledgerTables('sqlite'), journal: new Journal(null), tick: ticker.tick, stepDelayMs: 0 }),
      ],
    });
    return new Baseline(dir, api, ledger, waypoint, ticker);
  }

  /** Runs are serialized: the tick count belongs to one run at a time. */
  run(runId: string): Promise<{ state: unknown; ticks: number; durationMs: number }> {
    let cached = this.cache.get(runId);
    if (!cached) {
      cached = this.queue.then(async () => {
        this.ticker.count = 0;
        const start = performance.now();
        await this.waypoint.run(EffectsPipeline, { runId, input: { runId } });
        const durationMs = performance.now() - start;
        return { state: (await this.waypoint.checkpoint(runId)).shared_context, ticks: this.ticker.count, durationMs };
      });
      this.queue = cached.catch(() => undefined);
      this.cache.set(runId, cached);
    }
    return cached;
  }

  async close(): Promise<void> {
    await this.waypoint.close();
    await this.ledger.close();
    await this.api.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A database, the test's API, a reader and the baseline: what crash runs execute against. */
export class EffectsBench {
  private constructor(
    readonly backend: string,
    private readonly dir: string,
    readonly db: EffectsDatabase,
    readonly api: HttpCounter,
    readonly reader: Waypoint,
    readonly baseline: Baseline,
    private readonly stepDelayMs: number,
  ) {}

  static async open(backend: EffectsBackend, label: string, options: { stepDelayMs?: number } = {}): Promise<EffectsBench> {
    const dir = mkdtempSync(join(tmpdir(), 'waypoint-effects-crash-'));
    const db = await backend.open(label, dir);
    const api = await HttpCounter.start();
    const reader = await Waypoint.create({ modules: [db.storage(), new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent))] });
    const baseline = await Baseline.start();
    return new EffectsBench(backend.name, dir, db, api, reader, baseline, options.stepDelayMs ?? 2);
  }

  journalPath(runId: string): string {
    return join(this.dir, `journal-${runId}.jsonl`);
  }

  /**
   * Runs `runId` in a new process per planned kill, then one left to finish. A planned kill that is never
   * reached (the process finished first) ends the run early; a process that fails ends it too.
   */
  async execute(runId: string, kills: readonly Kill[]): Promise<RunLog> {
    const processes: ProcessLog[] = [];
    const env = {
      ...this.db.env,
      EFFECTS_HTTP_URL: this.api.url,
      EFFECTS_JOURNAL: this.journalPath(runId),
      EFFECTS_STEP_DELAY_MS: String(this.stepDelayMs),
      EFFECTS_KILL_AT_TICK: undefined,
      WAYPOINT_FAULT: undefined,
      WAYPOINT_LOG_LEVEL: 'error',
      // A restarted worker keeps its identity, so it retakes its own lease at once.
      WAYPOINT_WORKER_ID: `worker-${runId}`,
    };
    for (const kill of [...kills, null]) {
      const extra = kill?.kind === 'tick' ? { EFFECTS_KILL_AT_TICK: String(kill.tick) } : kill?.kind === 'fault' ? { WAYPOINT_FAULT: kill.spec } : {};
      const child = spawnNode(EFFECTS_WORKER, [runId], { ...env, ...extra });
      if (kill?.kind === 'time') void killAfterStart(child, kill.afterMs);
      const exit = await child.exited;
      const killed = exit.signal === 'SIGKILL';
      const log: ProcessLog = { pid: child.pid, kill: kill && describeKill(kill), killed, code: exit.code };
      processes.push(log);
      if (killed) continue;
      const last = parseLast(exit);
      if (exit.code === 0 && last.status === 'completed') return { runId, processes, completed: true };
      log.error = last.error ?? last;
      return { runId, processes, completed: false };
    }
    return { runId, processes, completed: false };
  }

  async verify(log: RunLog): Promise<RunReport> {
    const { state } = await this.baseline.run(log.runId);
    return verifyRun({ log, reader: this.reader, ledger: this.db.ledger, posts: this.api.postsOf(log.runId), journal: Journal.read(this.journalPath(log.runId)), baseline: state });
  }

  async close(): Promise<void> {
    await this.reader.close();
    await this.baseline.close();
    await this.api.close();
    await this.db.dispose();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function killAfterStart(child: ReturnType<typeof spawnNode>, afterMs: number): Promise<void> {
  try {
    await waitForLine(child, /"started":true/, 30_000);
  } catch {
    return; // exited before starting: nothing to kill
  }
  setTimeout(() => void child.kill('SIGKILL'), afterMs);
}

function parseLast(exit: ChildExit): { status?: string; error?: unknown } {
  try {
    return lastJsonLine<{ status?: string; error?: unknown }>(exit);
  } catch (error) {
    return { error: String(error) };
  }
}

/** How often a fresh run passes each named fault point (N of `point@N` ranges over 1..hits). */
export function faultHits(point: string): number {
  return point === 'before-effect' || point === 'after-effect-before-record' ? EFFECTS.length : STEP_KEYS.length;
}

/** One kill at a named fault point, and what it must and must not cause. */
export interface NamedCase {
  spec: string;
  /** External deliveries repeated (with the same key): only a kill between an external call and its record. */
  externalRepeats: number;
  /** The reconcile hook's answers expected on resume, when the kill left the charge's outcome unknown. */
  reconciled?: { found: number; notFound: number };
}

/**
 * Every named fault point at every hit of a fresh run ('all'), or each point at effects of each kind and
 * steps of each kind ('representative', for `npm test`).
 */
export function namedCases(scope: 'all' | 'representative'): NamedCase[] {
  const picks: Record<string, number[]> = {
    'before-effect': [1, 3, 5], // a transactional, an external and the reconciled effect
    'after-effect-before-record': [1, 3, 5],
    'after-record-before-checkpoint': [4], // the step with an external and a transactional effect
    'after-checkpoint-before-next-step': [3],
  };
  // Fleet points (around a queue job) are never reached by a plain run: the fleet tests kill at those.
  return RUNTIME_FAULT_POINTS.flatMap((point) => {
    const ordinals = scope === 'all' ? Array.from({ length: faultHits(point) }, (_, i) => i + 1) : (picks[point] ?? []);
    return ordinals.map((n) => {
      const effect = point === 'before-effect' || point === 'after-effect-before-record' ? EFFECTS[n - 1] : undefined;
      const between = point === 'after-effect-before-record';
      return {
        spec: `${point}@${n}`,
        externalRepeats: between && effect?.kind === 'external' ? 1 : 0,
        reconciled: effect?.kind === 'reconciled' ? (between ? { found: 1, notFound: 0 } : { found: 0, notFound: 1 }) : undefined,
      };
    });
  });
}

/** Draws the kills of one random run: mostly counted points, some delays, some named fault points. */
export function randomKills(rand: Random, bounds: { ticks: number; durationMs: number; maxKills: number }): Kill[] {
  const count = 1 + rand.int(bounds.maxKills);
  return Array.from({ length: count }, (): Kill => {
    const draw = rand.next();
    if (draw < 0.6) return { kind: 'tick', tick: 1 + rand.int(bounds.ticks) };
    if (draw < 0.85) return { kind: 'time', afterMs: rand.int(bounds.durationMs) };
    const point = rand.pick(RUNTIME_FAULT_POINTS);
    return { kind: 'fault', spec: `${point}@${1 + rand.int(faultHits(point))}` };
  });
}

export interface SeriesOptions {
  runs: number;
  seed: number;
  maxKills: number;
  jobs: number;
  /** Run ids are `<prefix>-<seed>-<i>`. */
  prefix?: string;
  onReport?: (report: RunReport, log: RunLog) => void;
}

/** A seeded series of randomly killed runs; each run's draws depend only on (seed, index). */
export async function runSeries(bench: EffectsBench, options: SeriesOptions): Promise<Totals> {
  const totals = emptyTotals();
  const probe = await bench.baseline.run(`${options.prefix ?? 'random'}-${options.seed}-probe`);
  // A child's run takes longer than the in-process baseline (fsync, pool warm-up); the window covers it.
  const bounds = { ticks: probe.ticks, durationMs: Math.max(60, Math.ceil(probe.durationMs * 3)), maxKills: options.maxKills };
  const indexes = Array.from({ length: options.runs }, (_, i) => i);
  await inPool(indexes, options.jobs, async (i) => {
    const runId = `${options.prefix ?? 'random'}-${options.seed}-${i}`;
    const log = await bench.execute(runId, randomKills(seeded(seedFor(options.seed, i)), bounds));
    const report = await bench.verify(log);
    addReport(totals, report);
    options.onReport?.(report, log);
  });
  return totals;
}
