/**
 * Runs (or resumes) one code-review run in this process and prints its `RunResult` as one JSON line on
 * stdout; on failure prints `{"error":{...}}` and exits 1. The demo spawns it and kills it.
 *
 *   node dist/examples/code-review/worker.js [runId]
 *
 * Environment: WAYPOINT_DB (SQLite file), WAYPOINT_WORKER_ID, WAYPOINT_LEASE_TTL_MS,
 * WAYPOINT_WAIT_FOR_LOCK_MS, WAYPOINT_LOG_LEVEL; the example's WAYPOINT_LLM_DELAY_MS, WAYPOINT_LLM_LOG and
 * WAYPOINT_OUTBOX. SIGTERM / SIGINT pause the run at the next step boundary.
 */
import 'reflect-metadata';
import { Waypoint } from 'waypoint-durable';
import { optionalNumber, runWorkerMain } from '../demo-support';
import { CodeReview, DEMO_INPUT, exampleModule, exampleOptionsFromEnv, storageFromEnv } from './pipeline';

async function main(): Promise<void> {
  const env = process.env;
  const runId = process.argv[2] ?? env.WAYPOINT_RUN_ID ?? 'pr-481';
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => stop.abort(`received ${signal}`);
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);

  const waypoint = await Waypoint.create({
    modules: [exampleModule(exampleOptionsFromEnv(env)), storageFromEnv(env)],
    pipelines: [CodeReview],
    workerId: env.WAYPOINT_WORKER_ID || undefined,
    leaseTtlMs: optionalNumber(env.WAYPOINT_LEASE_TTL_MS),
    waitForLockMs: optionalNumber(env.WAYPOINT_WAIT_FOR_LOCK_MS),
  });
  try {
    const result = await waypoint.run(CodeReview, { runId, input: { ...DEMO_INPUT }, signal: stop.signal });
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await waypoint.close();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

runWorkerMain(main);
