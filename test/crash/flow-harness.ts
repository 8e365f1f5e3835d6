import 'reflect-metadata';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ContainerModule } from 'inversify';
import { TOKENS, Waypoint, memoryStorage, type Logger } from '../../src/index';
import { ledgerRows } from '../effects/ledger';
import { lastJsonLine, spawnNode, waitForLine, type ChildExit } from '../helpers/child-process';
import type { EffectsBackend, EffectsDatabase } from './effects-harness';
import { inPool } from './harness';
import { FLOW_SIZE, FlowCrashPipeline, MemoryLedger, flowInput, flowPipelineModule } from './flow-pipeline';
import { readFlow, verifyFlow, type FlowView } from './flow-verify';
import { seedFor, seeded } from './prng';

/** The compiled worker, next to this file. */
export const FLOW_WORKER = resolve(__dirname, 'flow-worker.js');

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };
const quiet = () => new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent));

export interface FlowSize {
  items: number;
  customers: number;
}

/**
 * The same run ids executed once each, uninterrupted, in this process on the memory store: the rows,
 * bookings and final state the crashed runs must end with.
 */
export class FlowBaseline {
  private readonly cache = new Map<string, Promise<FlowView>>();

  private constructor(
    private readonly waypoint: Waypoint,
    private readonly ledger: MemoryLedger,
    private readonly size: FlowSize,
  ) {}

  static async start(size: FlowSize = FLOW_SIZE): Promise<FlowBaseline> {
    const ledger = new MemoryLedger();
    const waypoint = await Waypoint.create({ modules: [memoryStorage(), quiet(), flowPipelineModule(ledger, () => 0)], pipelines: [FlowCrashPipeline] });
    return new FlowBaseline(waypoint, ledger, size);
  }

  /** The memory store's Waypoint and ledger (for the in-process dry run of the checks). */
  get reader(): Waypoint {
    return this.waypoint;
  }

  bookings(runId: string): Promise<{ run_id: string; op_key: string; item: string; amount: number }[]> {
    return Promise.resolve(this.ledger.rows.filter((r) => r.run_id === runId));
  }

  run(runId: string): Promise<FlowView> {
    let cached = this.cache.get(runId);
    if (!cached) {
      cached = (async () => {
        const result = await this.waypoint.run(FlowCrashPipeline, { runId, input: flowInput(runId, this.size) });
        if (result.status !== 'completed') throw new Error(`baseline run ${runId} ended ${result.status}`);
        return readFlow(this.waypoint, runId, (id) => this.bookings(id));
      })();
      this.cache.set(runId, cached);
    }
    return cached;
  }

  close(): Promise<void> {
    return this.waypoint.close();
  }
}

/** One worker process of a trial: when it was to be killed, and how it ended. */
export interface FlowProcess {
  pid: number;
  /** Milliseconds after the worker said it started; null for the last process, left to finish. */
  killAfterMs: number | null;
  killed: boolean;
  code: number | null;
  /** Rows of the root run and of its child runs, and child runs completed, when the process ended (where it was killed). */
  rootRows: number;
  childRows: number;
  childrenCompleted: number;
  error?: unknown;
}

/** A SIGKILL at a fraction of the work left, or as soon as the child runs hold `childRows` rows in all. */
export type FlowKill = number | { childRows: number };

/** A trial: its seed, the planned kills, what each process did, and the checks' verdict. */
export interface FlowTrial {
  runId: string;
  seed: number;
  /** Each kill: a fraction of the work left when its process starts, or a row count (see FlowBench.execute). */
  kills: FlowKill[];
  processes: FlowProcess[];
  completed: boolean;
  violations: string[];
}

export function describeTrial(trial: FlowTrial): string {
  const where = (p: FlowProcess) => `root rows ${p.rootRows}, child rows ${p.childRows}, children done ${p.childrenCompleted}`;
  const steps = trial.processes.map((p) =>
    p.killed ? `killed +${p.killAfterMs}ms (${where(p)})` : p.code === 0 ? `completed (${where(p)})` : `failed(${p.code}) (${where(p)}): ${JSON.stringify(p.error)}`,
  );
  return `${trial.runId} [seed ${trial.seed}, kills ${JSON.stringify(trial.kills.map((k) => (typeof k === 'number' ? Number(k.toFixed(3)) : k)))}]: ${steps.join(' -> ')}`;
}

/** A database and its reader, the uncrashed baseline, and the workers that run trials against them. */
export class FlowBench {
  private constructor(
    readonly backend: string,
    private readonly dir: string,
    readonly db: EffectsDatabase,
    readonly reader: Waypoint,
    readonly baseline: FlowBaseline,
    private readonly options: { maxDelayMs: number; size: FlowSize },
  ) {}

  static async open(backend: EffectsBackend, label: string, options: { maxDelayMs?: number; size?: FlowSize } = {}): Promise<FlowBench> {
    const dir = mkdtempSync(join(tmpdir(), 'waypoint-flow-crash-'));
    const db = await backend.open(label, dir);
    const reader = await Waypoint.create({ modules: [db.storage(), quiet(), flowPipelineModule(new MemoryLedger(), () => 0)], pipelines: [FlowCrashPipeline] });
    const size = options.size ?? FLOW_SIZE;
    const baseline = await FlowBaseline.start(size);
    return new FlowBench(backend.name, dir, db, reader, baseline, { maxDelayMs: options.maxDelayMs ?? 6, size });
  }

  private probed?: Promise<{ durationMs: number; rows: number }>;

  /**
   * One uncrashed run in a worker process: how long a fresh run takes there (from "started" to exit) and
   * how many rows it writes (root and children), which scale the kills to the work left.
   */
  probe(): Promise<{ durationMs: number; rows: number }> {
    this.probed ??= (async () => {
      const runId = 'probe';
      const child = this.spawn(runId, 0, 0);
      await waitForLine(child, /"started":true/, 60_000);
      const start = performance.now();
      const exit = await child.exited;
      const durationMs = performance.now() - start;
      if (exit.code !== 0) throw new Error(`the probe run failed: ${exit.stdout.slice(-500)} ${exit.stderr.slice(-500)}`);
      const where = await this.where(runId);
      return { durationMs, rows: where.rootRows + where.childRows };
    })();
    return this.probed;
  }

  private spawn(runId: string, seed: number, processIndex: number) {
    return spawnNode(FLOW_WORKER, [runId], {
      ...this.db.env,
      FLOW_SEED: String(seed),
      FLOW_PROCESS: String(processIndex),
      FLOW_MAX_DELAY_MS: String(this.options.maxDelayMs),
      FLOW_ITEMS: String(this.options.size.items),
      FLOW_CUSTOMERS: String(this.options.size.customers),
      WAYPOINT_FAULT: undefined,
      WAYPOINT_LOG_LEVEL: 'error',
      // A restarted worker keeps its identity, so it retakes its own (and its child runs') leases at once.
      WAYPOINT_WORKER_ID: `flow-worker-${runId}`,
    });
  }

  /**
   * Runs `runId` in a new process per planned kill, then one left to finish. A kill `f` (in [0, 1)) is a
   * SIGKILL `5 + f * (time of a fresh run) * (share of rows still to write)` ms after the worker started
   * running, so later kills land in later constructs. A process that finishes before its kill ends the
   * trial early; one that fails too.
   */
  async execute(runId: string, seed: number, kills: readonly FlowKill[]): Promise<FlowTrial> {
    const trial: FlowTrial = { runId, seed, kills: [...kills], processes: [], completed: false, violations: [] };
    const probe = await this.probe();
    let returned: unknown;
    let done = 0;
    for (const [index, kill] of [...kills, null].entries()) {
      const left = Math.max(0.05, 1 - done / probe.rows);
      let killAfterMs = typeof kill === 'number' ? Math.round(5 + kill * probe.durationMs * left) : null;
      const child = this.spawn(runId, seed, index);
      if (killAfterMs !== null) void killAfterStart(child, killAfterMs);
      const watched = kill !== null && typeof kill === 'object' ? this.killAtRows(runId, child, kill.childRows) : null;
      const exit = await child.exited;
      if (watched) killAfterMs = await watched;
      const killed = exit.signal === 'SIGKILL';
      const where = await this.where(runId);
      done = where.rootRows + where.childRows;
      const log: FlowProcess = { pid: child.pid, killAfterMs, killed, code: exit.code, ...where };
      trial.processes.push(log);
      if (killed) continue;
      const last = parseLast(exit);
      if (exit.code === 0 && last.status === 'completed') {
        trial.completed = true;
        returned = last.state;
      } else {
        log.error = last.error ?? last;
      }
      break;
    }
    if (!trial.completed) {
      trial.violations.push(`${runId}: did not complete: ${describeTrial(trial)}`);
      return trial;
    }
    trial.violations.push(...(await this.verify(runId, returned)));
    return trial;
  }

  /** The checks of a completed run against the uncrashed run of the same id. */
  async verify(runId: string, returnedState?: unknown): Promise<string[]> {
    const expected = await this.baseline.run(runId);
    const actual = await readFlow(this.reader, runId, (id) => ledgerRows(this.db.ledger, id));
    return verifyFlow(actual, expected, returnedState);
  }

  /** Polls the store from the worker's start and kills it once the child runs hold `childRows` rows; resolves to the ms it took. */
  private async killAtRows(runId: string, child: ReturnType<typeof spawnNode>, childRows: number): Promise<number | null> {
    try {
      await waitForLine(child, /"started":true/, 30_000);
    } catch {
      return null;
    }
    const start = performance.now();
    while (!child.exitedYet()) {
      if ((await this.where(runId)).childRows >= childRows) {
        await child.kill('SIGKILL');
        return Math.round(performance.now() - start);
      }
      await new Promise((r) => setTimeout(r, 3));
    }
    return null;
  }

  private async where(runId: string): Promise<{ rootRows: number; childRows: number; childrenCompleted: number }> {
    const run = await this.reader.store.getRun(runId);
    const children = await this.reader.store.listRuns({ parentRunId: runId });
    return {
      rootRows: run?.lastSequence ?? 0,
      childRows: children.reduce((n, c) => n + c.lastSequence, 0),
      childrenCompleted: children.filter((c) => c.status === 'completed').length,
    };
  }

  async close(): Promise<void> {
    await this.reader.close();
    await this.baseline.close();
    await this.db.dispose();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Draws a trial's kills: `min..max` of them, each a fraction of the work left (see FlowBench.execute). */
export function flowKills(seed: number, options: { minKills: number; maxKills: number }): number[] {
  const rand = seeded(seed);
  const count = options.minKills + rand.int(options.maxKills - options.minKills + 1);
  return Array.from({ length: count }, () => rand.next());
}

export interface FlowSeriesOptions {
  trials: number;
  seed: number;
  jobs: number;
  minKills?: number;
  maxKills?: number;
  prefix?: string;
  onTrial?: (trial: FlowTrial) => void;
}

/** A seeded series of trials; each trial's kills depend only on (seed, index). */
export async function runFlowSeries(bench: FlowBench, options: FlowSeriesOptions): Promise<FlowTrial[]> {
  const trials: FlowTrial[] = [];
  const indexes = Array.from({ length: options.trials }, (_, i) => i);
  await inPool(indexes, options.jobs, async (i) => {
    const seed = seedFor(options.seed, i);
    const kills = flowKills(seed, { minKills: options.minKills ?? 2, maxKills: options.maxKills ?? 4 });
    const trial = await bench.execute(`${options.prefix ?? 'flow'}-${options.seed}-${i}`, seed, kills);
    trials.push(trial);
    options.onTrial?.(trial);
  });
  return trials;
}

async function killAfterStart(child: ReturnType<typeof spawnNode>, afterMs: number): Promise<void> {
  try {
    await waitForLine(child, /"started":true/, 30_000);
  } catch {
    return; // exited before starting: nothing to kill
  }
  setTimeout(() => void child.kill('SIGKILL'), afterMs);
}

function parseLast(exit: ChildExit): { status?: string; state?: unknown; error?: unknown } {
  try {
    return lastJsonLine<{ status?: string; state?: unknown; error?: unknown }>(exit);
  } catch (error) {
    return { error: `${String(error)}; stderr: ${exit.stderr.slice(-500)}` };
  }
}
