import 'reflect-metadata';
import { existsSync } from 'node:fs';
import { Waypoint, WaypointError, type RunResult } from '../../src/index';
import type { CheckpointStore } from '../../src/contract/checkpoint-store';
import { storeFromEnv, storeModule } from './backends';
import { leasePipeline, logExec } from './lease-pipeline';

/**
 * A worker process of the lease tests: opens the store the environment names (see backends.ts), says
 * `{"ready":true}`, waits for the go file, then calls `waypoint.run` on the run, and prints one JSON line
 * with the result or the error. Exit code: 0 done (completed or paused), 2 RUN_LOCKED, 3 LEASE_LOST,
 * 4 STORE_UNAVAILABLE, 1 anything else.
 *
 * Environment: WP_RUN_ID, WP_WORKER_ID, WP_EXEC_LOG, WP_GO (file to wait for), WP_LEASE_TTL_MS,
 * WP_HEARTBEAT_MS, WP_WAIT_FOR_LOCK_MS, WP_STEP_MS, WP_MAX_STEPS (pause after running this many steps),
 * WP_LOOP=1 (call run again after each pause or RUN_LOCKED, every WP_RETRY_MS, until the run completes;
 * the output then counts the RUN_LOCKED answers as `locked`), WP_HOLD_FIRST (file the first
 * step run here waits for), WP_HOLD_STEP + WP_HOLD_FILE (that step waits for that file, ignoring aborts).
 */
const env = process.env;
const runId = env.WP_RUN_ID ?? 'lease-run';
const worker = env.WP_WORKER_ID ?? `worker-${process.pid}`;
const log = env.WP_EXEC_LOG!;
const maxSteps = Number(env.WP_MAX_STEPS ?? Infinity);

const EXIT_CODES: Record<string, number> = { RUN_LOCKED: 2, LEASE_LOST: 3, STORE_UNAVAILABLE: 4 };

/** Every write the runtime makes goes through here, so the log shows attempted writes and their outcome. */
const WRITES = new Set(['appendStep', 'updateRun', 'beginOperation', 'finishOperation', 'truncateSteps']);

function recorded(store: CheckpointStore): CheckpointStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || !WRITES.has(property) || typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        const sequence = property === 'appendStep' ? (args[0] as { step: { sequence: number } }).step.sequence : undefined;
        try {
          const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          logExec(log, { event: 'write', worker, method: property, sequence, outcome: 'ok' });
          return result;
        } catch (error) {
          logExec(log, { event: 'write', worker, method: property, sequence, outcome: (error as { code?: string }).code ?? 'error' });
          throw error;
        }
      };
    },
  });
}

async function main(): Promise<number> {
  let stop = new AbortController();
  let ranThisCall = 0;
  const pipeline = leasePipeline({
    worker,
    log,
    stepMs: Number(env.WP_STEP_MS ?? 0),
    holdFirstStepUntil: env.WP_HOLD_FIRST,
    holdStep: env.WP_HOLD_STEP,
    holdFile: env.WP_HOLD_FILE,
    afterStep: () => {
      ranThisCall += 1;
      if (ranThisCall >= maxSteps) stop.abort('step budget of this call used');
    },
  });
  const store = storeFromEnv(env);
  const waypoint = await Waypoint.create({
    modules: [storeModule(recorded(store))],
    workerId: worker,
    leaseTtlMs: Number(env.WP_LEASE_TTL_MS ?? 1_000),
    heartbeatMs: env.WP_HEARTBEAT_MS ? Number(env.WP_HEARTBEAT_MS) : undefined,
    waitForLockMs: Number(env.WP_WAIT_FOR_LOCK_MS ?? 0),
  });
  process.stdout.write(JSON.stringify({ ready: true, pid: process.pid }) + '\n');
  while (env.WP_GO && !existsSync(env.WP_GO)) await new Promise((resolve) => setTimeout(resolve, 2));
  try {
    const results: RunResult[] = [];
    let locked = 0;
    for (;;) {
      let result: RunResult;
      try {
        result = await waypoint.run(pipeline, { runId, input: {}, signal: stop.signal });
      } catch (error) {
        if (env.WP_LOOP !== '1') throw error;
        const code = (error as { code?: string }).code;
        if (code === 'RUN_LOCKED') {
          // Another worker holds the run: a job queue would retry later, so do we.
          locked += 1;
          await new Promise((resolve) => setTimeout(resolve, Number(env.WP_RETRY_MS ?? 10)));
          continue;
        }
        throw error;
      }
      results.push(result);
      if (env.WP_LOOP !== '1' || result.status === 'completed') break;
      stop = new AbortController();
      ranThisCall = 0;
    }
    const executed = results.reduce((sum, r) => sum + r.stepsExecuted, 0);
    process.stdout.write(JSON.stringify({ pid: process.pid, worker, locked, result: { ...results.at(-1), stepsExecuted: executed, calls: results.length } }) + '\n');
    return 0;
  } catch (error) {
    const code = error instanceof WaypointError ? error.code : 'UNEXPECTED';
    process.stdout.write(JSON.stringify({ pid: process.pid, worker, error: { code, message: (error as Error).message } }) + '\n');
    return EXIT_CODES[code] ?? 1;
  } finally {
    await waypoint.close().catch(() => undefined);
  }
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stdout.write(
      JSON.stringify({ pid: process.pid, worker, error: { code: 'CRASH', message: String((error as { stack?: unknown } | null | undefined)?.stack ?? error) } }) + '\n',
    );
    process.exit(1);
  },
);
