/**
 * Runs (or resumes) one run of the live-output crash pipeline in this process and prints its RunResult
 * as the last JSON line (`{"error":...}` and exit code 1 on failure). The test kills it for real.
 *
 *   node dist/test/crash/live-output-worker.js '<LivePlace JSON>' <runId> <workerId>
 */
import 'reflect-metadata';
import { WaypointError } from '../../src/index';
import { openLive, type LivePlace } from './live-output-backends';
import { LiveCrashPipeline } from './live-output-pipeline';

async function main(): Promise<void> {
  const [placeJson, runId, workerId] = process.argv.slice(2);
  const place = JSON.parse(placeJson) as LivePlace;
  // A short lease: the next worker takes the run over soon after this one is killed.
  const waypoint = await openLive(place, { workerId, leaseTtlMs: 1_000, heartbeatMs: 200 });
  try {
    process.stdout.write('{"started":true}\n');
    const result = await waypoint.run(LiveCrashPipeline, { runId, input: {}, waitForLockMs: 20_000 });
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await waypoint.close();
  }
}

main().catch((error: unknown) => {
  const described =
    error instanceof WaypointError
      ? { code: error.code, message: error.message }
      : { code: null, message: error instanceof Error ? (error.stack ?? error.message) : String(error) };
  process.stdout.write(JSON.stringify({ error: described }) + '\n');
  process.exitCode = 1;
});
