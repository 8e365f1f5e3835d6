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
  /** Rows of the root run, and child runs completed, when the process ended (where it was killed). */
  rootRows: number;
  childrenCompleted: number;
  error?: unknown;
}

/** A trial: its seed, the planned kills, what each process did, and the checks' verdict. */
export interface FlowTrial {
  runId: string;
  seed: number;
  kills: number[];
  processes: FlowProcess[];
  completed: boolean;
  violations: string[];
}

export function describeTrial(trial: FlowTrial): string {
  const steps = trial.processes.map((p) => (p.killed ? `killed +${p.killAfterMs}ms (root rows ${p.rootRows}, children done ${p.childrenCompleted})` : p.code === 0 ? `completed (root rows ${p.rootRows})` : `failed(${p.code}): ${JSON.stringify(p.error)}`));
  return `${trial.runId} [seed ${trial.seed}, kills ${JSON.stringify(trial.kills)}]: ${steps.join(' -> ')}`;
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

  /**
   * Runs `runId` in a new process per planned kill (SIGKILL `ms` after the worker started running), then
   * one left to finish. A process that finishes before its kill ends the trial early; one that fails too.
   */
  async execute(runId: string, seed: number, kills: readonly number[]): Promise<FlowTrial> {
    const trial: FlowTrial = { runId, seed, kills: [...kills], processes: [], completed: false, violations: [] };
    let returned: unknown;
    for (const [index, killAfterMs] of [...kills, null].entries()) {
      const child = spawnNode(FLOW_WORKER, [runId], {
        ...this.db.env,
        FLOW_SEED: String(seed),
        FLOW_PROCESS: String(index),
        FLOW_MAX_DELAY_MS: String(this.options.maxDelayMs),
        FLOW_ITEMS: String(this.options.size.items),
        FLOW_CUSTOMERS: String(this.options.size.customers),
        WAYPOINT_FAULT: undefined,
        WAYPOINT_LOG_LEVEL: 'error',
        // A restarted worker keeps its identity, so it retakes its own (and its child runs') leases at once.
        WAYPOINT_WORKER_ID: `flow-worker-${runId}`,
      });
      if (killAfterMs !== null) void killAfterStart(child, killAfterMs);
      const exit = await child.exited;
      const killed = exit.signal === 'SIGKILL';
      const where = await this.where(runId);
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

  private async where(runId: string): Promise<{ rootRows: number; childrenCompleted: number }> {
    const run = await this.reader.store.getRun(runId);
    const children = await this.reader.store.listRuns({ parentRunId: runId });
    return { rootRows: run?.lastSequence ?? 0, childrenCompleted: children.filter((c) => c.status === 'completed').length };
  }

  async close(): Promise<void> {
    await this.reader.close();
    await this.baseline.close();
    await this.db.dispose();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Draws a trial's kills: `min..max` of them, each at a delay in [5, windowMs) after the worker started. */
export function flowKills(seed: number, options: { minKills: number; maxKills: number; windowMs: number }): number[] {
  const rand = seeded(seed);
  const count = options.minKills + rand.int(options.maxKills - options.minKills + 1);
  return Array.from({ length: count }, () => 5 + rand.int(Math.max(1, options.windowMs - 5)));
}

export interface FlowSeriesOptions {
  trials: number;
  seed: number;
  jobs: number;
  minKills?: number;
  maxKills?: number;
  /** Kills land within this many ms of a worker's start (a fresh run takes a few hundred ms in a child). */
  windowMs?: number;
  prefix?: string;
  onTrial?: (trial: FlowTrial) => void;
}

/** A seeded series of trials; each trial's kills depend only on (seed, index). */
export async function runFlowSeries(bench: FlowBench, options: FlowSeriesOptions): Promise<FlowTrial[]> {
  const trials: FlowTrial[] = [];
  const indexes = Array.from({ length: options.trials }, (_, i) => i);
  await inPool(indexes, options.jobs, async (i) => {
    const seed = seedFor(options.seed, i);
    const kills = flowKills(seed, { minKills: options.minKills ?? 2, maxKills: options.maxKills ?? 4, windowMs: options.windowMs ?? 700 });
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
