import 'reflect-metadata';
import { cpus } from 'node:os';
import { IsInt, IsString, Min } from 'class-validator';
import { Agent, Pipeline, Step, type StepContext } from '../src/index';
import { enqueue } from '../src/entry/queue';
import { FLEET_WORKER_FLAG, completedRuns, median, runFleetWorker, sleep, spawnFleetWorkers, spread, withBenchFleet } from './fleet-workers';
import { renderText, section, type Section } from './report';

/**
 * Fleet throughput: runs/s and steps/s of 1, 2 and 4 worker processes (PostgreSQL store, pg-boss queue)
 * draining the same batch of queued 10-step runs with trivial steps, so what is measured is Waypoint's
 * and the queue's own cost per run and per step on this machine. Each worker runs 4 runs at once. The
 * clock starts when every worker is up and told to go, and stops when the last run is completed.
 *
 * From `bench/index.ts`: `sections.push(await runFleetBench({ quick: q, progress }))`.
 * Standalone: `node dist/bench/fleet.js [--quick]` prints the table.
 */

const STEPS = 10;
const CONCURRENCY = 4;

export interface FleetBenchOptions {
  /** Fewer runs and one round per worker count (a smoke run, not for quoting). */
  quick?: boolean;
  /** Worker process counts to measure. Default [1, 2, 4]. */
  workers?: number[];
  /** Runs per round. Default 120 (quick: 60). */
  runs?: number;
  /** Rounds per worker count; the median is reported. Default 3 (quick: 1). */
  rounds?: number;
  pgUrl?: string;
  progress?: (line: string) => void;
}

class BenchOrder {
  @IsString()
  customer!: string;

  @IsInt()
  @Min(0)
  n!: number;
}

class FirstHalf extends Agent {
  @Step() a1(ctx: StepContext<BenchOrder>) {
    return { a1: ctx.state.n };
  }
  @Step() a2() {
    return { a2: 2 };
  }
  @Step() a3() {
    return { a3: 3 };
  }
  @Step() a4() {
    return { a4: 4 };
  }
  @Step() a5() {
    return { a5: 5 };
  }
}

class SecondHalf extends Agent {
  @Step() b1() {
    return { b1: 1 };
  }
  @Step() b2() {
    return { b2: 2 };
  }
  @Step() b3() {
    return { b3: 3 };
  }
  @Step() b4() {
    return { b4: 4 };
  }
  @Step() b5() {
    return { b5: 5 };
  }
}

@Pipeline({ name: 'fleet-bench', version: '1.0.0', state: BenchOrder, agents: [FirstHalf, SecondHalf] })
class FleetBenchPipeline {}

interface Round {
  workers: number;
  seconds: number;
  runsPerSecond: number;
  stepsPerSecond: number;
}

/**
 * Measures fleet throughput with 1, 2 and 4 worker processes and returns the bench section (table +
 * figures). Schemas are created per round and dropped afterwards.
 *
 * @example
 * const fleet = await runFleetBench({ quick: true, progress: (l) => process.stderr.write(l + '\n') });
 */
export async function runFleetBench(options: FleetBenchOptions = {}): Promise<Section> {
  const quick = options.quick ?? false;
  const counts = options.workers ?? [1, 2, 4];
  const runs = options.runs ?? (quick ? 60 : 120);
  const rounds = options.rounds ?? (quick ? 1 : 3);
  const pgUrl = options.pgUrl ?? process.env.WAYPOINT_BENCH_PG_URL ?? process.env.WAYPOINT_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const progress = options.progress ?? (() => undefined);
  const result = section(
    'fleet',
    `Fleet throughput (PostgreSQL store + pg-boss, ${STEPS}-step runs, ${CONCURRENCY} runs at once per worker)`,
    `${runs} queued runs drained by N worker processes; clock from "go" to the last run completed; median of ${rounds} round(s) with (min–max). ${cpus().length} CPU(s).`,
    ['workers', 'runs/s', 'steps/s', 'vs 1 worker'],
  );
  const all: Round[] = [];
  for (const workers of counts) {
    for (let round = 0; round < rounds; round++) {
      progress(`fleet: ${workers} worker(s), round ${round + 1}/${rounds}`);
      all.push(await measure(pgUrl, workers, runs));
    }
  }
  const base = median(all.filter((r) => r.workers === counts[0]).map((r) => r.runsPerSecond));
  for (const workers of counts) {
    const mine = all.filter((r) => r.workers === workers);
    const rps = mine.map((r) => r.runsPerSecond);
    const sps = mine.map((r) => r.stepsPerSecond);
    result.rows.push([String(workers), spread(rps), spread(sps), `${(median(rps) / base).toFixed(2)}x`]);
  }
  result.notes.push(
    'Steps do no work: the figures are the per-run and per-step cost of leases, checkpoints and the queue. With 2 CPUs shared by PostgreSQL and the workers, more processes mostly add contention.',
  );
  result.figures = { steps: STEPS, concurrencyPerWorker: CONCURRENCY, runs, rounds, samples: all };
  return result;
}

async function measure(pgUrl: string, workers: number, runs: number): Promise<Round> {
  return withBenchFleet(pgUrl, 'fleet', [FleetBenchPipeline], async (fleet) => {
    for (let i = 0; i < runs; i += 20) {
      await Promise.all(
        Array.from({ length: Math.min(20, runs - i) }, (_, j) =>
          enqueue(fleet.waypoint, FleetBenchPipeline, { runId: `bench-${i + j}`, input: { customer: 'c', n: i + j }, queue: fleet.queue }),
        ),
      );
    }
    const go = await spawnFleetWorkers(fleet, __filename, workers);
    const started = performance.now();
    go();
    while ((await completedRuns(fleet)) < runs) await sleep(25);
    const seconds = (performance.now() - started) / 1000;
    return { workers, seconds, runsPerSecond: runs / seconds, stepsPerSecond: (runs * STEPS) / seconds };
  });
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  const task =
    argv[0] === FLEET_WORKER_FLAG
      ? runFleetWorker({ pipelines: [FleetBenchPipeline], concurrency: CONCURRENCY, recoverOrphans: false })
      : runFleetBench({ quick: argv.includes('--quick'), progress: (l) => process.stderr.write(`bench: ${l}\n`) }).then(printSection);
  task.then(
    () => process.exit(process.exitCode ?? 0),
    (error: unknown) => {
      process.stderr.write(`fleet bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}

function printSection(s: Section): void {
  process.stdout.write(renderText([s], [`Waypoint fleet bench — ${new Date().toISOString()}`]) + '\n');
}
