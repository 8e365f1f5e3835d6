/**
 * Runs one fleet-test run in this process with plain `waypoint.run` (no queue), to be killed mid-run by
 * the orphan tests. Prints `{"event":"created"}` once the Waypoint is up.
 *
 *   node orphan-child-main.js <runId>   with FLEET_PG_URL, FLEET_STORE_SCHEMA, FLEET_STEP_MS,
 *   FLEET_LEASE_TTL_MS and optionally FLEET_LEASE_OWNER (a lease owner id of another host's shape).
 */
import 'reflect-metadata';
import { Waypoint, postgresStorage } from '../../src/index';
import { FleetEnv, FleetPipeline, fleetModule } from './fleet-pipeline';

async function main(): Promise<void> {
  const env = process.env;
  const runId = process.argv[2];
  const url = env.FLEET_PG_URL!;
  const schema = env.FLEET_STORE_SCHEMA!;
  const fleetEnv = new FleetEnv({ url, schema, worker: 'child', stepMs: Number(env.FLEET_STEP_MS ?? 200) });
  const waypoint = await Waypoint.create({
    modules: [postgresStorage({ url, schema }), fleetModule(fleetEnv)],
    workerId: env.FLEET_LEASE_OWNER || undefined,
    leaseTtlMs: Number(env.FLEET_LEASE_TTL_MS ?? 1_500),
  });
  process.stdout.write(JSON.stringify({ event: 'created' }) + '\n');
  const result = await waypoint.run(FleetPipeline, { runId, input: { customer: 'orphan', amount: 5 } });
  process.stdout.write(JSON.stringify({ event: 'done', status: result.status }) + '\n');
  await waypoint.close();
  await fleetEnv.close();
}

main().catch((error: unknown) => {
  process.stdout.write(JSON.stringify({ event: 'error', message: error instanceof Error ? error.message : String(error) }) + '\n');
  process.exitCode = 1;
});
