/**
 * Runs (or resumes) one financial-analysis run in this process and prints its `RunResult` as one JSON
 * line on stdout; on failure prints `{"error":{...}}` and exits 1. The demo and the crash tests spawn it
 * and kill it.
 *
 *   node dist/examples/financial-analysis/worker.js [runId] [ticker]
 *
 * Environment: WAYPOINT_DB (SQLite file, default ./.waypoint/demo.db) or WAYPOINT_PG_URL +
 * WAYPOINT_PG_SCHEMA; WAYPOINT_RUN_ID, WAYPOINT_TICKER; WAYPOINT_WORKER_ID, WAYPOINT_LEASE_TTL_MS,
 * WAYPOINT_WAIT_FOR_LOCK_MS; the example's WAYPOINT_LLM_DELAY_MS, WAYPOINT_LLM_LOG, WAYPOINT_LLM_HOLD,
 * WAYPOINT_OUTBOX; and the runtime's WAYPOINT_FAULT (crash at a named point) and WAYPOINT_LOG_LEVEL.
 * SIGTERM / SIGINT pause the run at the next step boundary.
 */
import 'reflect-metadata';
import { Waypoint } from 'waypoint-durable';
import { optionalNumber, runWorkerMain } from '../demo-support';
import { DEMO_INPUT, FinancialAnalysis, exampleModule, exampleOptionsFromEnv, storageFromEnv } from './pipeline';

async function main(): Promise<void> {
  const env = process.env;
  const runId = process.argv[2] ?? env.WAYPOINT_RUN_ID ?? 'q3-aapl';
  const ticker = process.argv[3] ?? env.WAYPOINT_TICKER ?? DEMO_INPUT.ticker;
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => stop.abort(`received ${signal}`);
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);

  const waypoint = await Waypoint.create({
    modules: [exampleModule(exampleOptionsFromEnv(env)), storageFromEnv(env)],
    workerId: env.WAYPOINT_WORKER_ID || undefined,
    leaseTtlMs: optionalNumber(env.WAYPOINT_LEASE_TTL_MS),
    waitForLockMs: optionalNumber(env.WAYPOINT_WAIT_FOR_LOCK_MS),
  });
  try {
    const result = await waypoint.run(FinancialAnalysis, { runId, input: { ...DEMO_INPUT, ticker }, signal: stop.signal });
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await waypoint.close();
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
}

runWorkerMain(main);
