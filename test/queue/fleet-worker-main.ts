/**
 * A fleet worker process for the multi-process tests: a Waypoint on the test's PostgreSQL schema, the
 * test's queue (pg-boss or BullMQ, from the environment), and `startWorker` on the fleet test pipeline.
 * Prints JSON lines on stdout: `{"event":"ready"}`, one `{"event":"fetched","runId"}` per job taken from
 * the queue, one `{"event":"settled",...}` per settled job, and `{"event":"stopped","stats":{...}}` after a
 * graceful stop (SIGTERM), then exits 0. (stdout is a pipe, written synchronously on Linux, so a line
 * printed before a SIGKILL is not lost.)
 *
 *   FLEET_PG_URL, FLEET_STORE_SCHEMA, FLEET_WORKER_ID, FLEET_CONCURRENCY, FLEET_STEP_MS,
 *   FLEET_LEASE_TTL_MS, FLEET_POLL_MS, FLEET_SWEEP_MS (0: no orphan sweep), FLEET_STUCK_MS, and the
 *   queue's FLEET_QUEUE*.
 *   FLEET_DEFAULTS=1: the library's defaults for the lease TTL, poll interval, locked-run retry and the
 *   orphan sweep (the FLEET_* timing variables above are ignored).
 *   FLEET_PIPELINES=fanout: the fan-out test pipelines (fanout-pipeline.ts) instead of the fleet pipeline.
 *   FLEET_FOREIGN_OWNER=1: a lease owner id of another host's shape, so that no process on this host can
 *   tell the worker died: its runs are freed only by lease expiry, as between hosts.
 */
import 'reflect-metadata';
import { Waypoint, postgresStorage } from '../../src/index';
import { RUN_QUEUE, startWorker, type WorkerOptions } from '../../src/queue/index';
import { FleetEnv, FleetPipeline, fleetModule } from './fleet-pipeline';
import { FANOUT_PIPELINES } from './fanout-pipeline';
import { queueFromEnv } from './queue-backends';

async function main(): Promise<void> {
  const env = process.env;
  const workerId = required('FLEET_WORKER_ID');
  const url = required('FLEET_PG_URL');
  const schema = required('FLEET_STORE_SCHEMA');
  const fleetEnv = new FleetEnv({ url, schema, worker: workerId, stepMs: Number(env.FLEET_STEP_MS ?? 20) });
  const defaults = env.FLEET_DEFAULTS === '1';
  const queue = queueFromEnv(env);
  const fetch = queue.fetch.bind(queue);
  queue.fetch = async (name, limit) => {
    const deliveries = await fetch(name, limit);
    for (const delivery of deliveries) print({ event: 'fetched', worker: workerId, runId: delivery.job.runId, jobId: delivery.id });
    return deliveries;
  };
  const waypoint = await Waypoint.create({
    modules: [postgresStorage({ url, schema, poolSize: 6 }), fleetModule(fleetEnv)],
    // By default the lease owner keeps the host:pid:random shape, so a dead worker is recognised on this host.
    workerId: env.FLEET_FOREIGN_OWNER === '1' ? `${workerId}.elsewhere:1:${process.pid}` : undefined,
    leaseTtlMs: defaults ? undefined : Number(env.FLEET_LEASE_TTL_MS ?? 2_000),
  });
  waypoint.container.bind(RUN_QUEUE).toConstantValue(queue);
  const sweepMs = Number(env.FLEET_SWEEP_MS ?? 0);
  const stuckAfterMs = env.FLEET_STUCK_MS ? Number(env.FLEET_STUCK_MS) : undefined;
  const timings: Partial<WorkerOptions> = defaults
    ? {}
    : {
        pollIntervalMs: Number(env.FLEET_POLL_MS ?? 100),
        lockedRetryMaxMs: 3_000,
        recoverOrphans: sweepMs > 0 ? { everyMs: sweepMs, stuckAfterMs } : false,
      };
  const worker = await startWorker(waypoint, {
    pipelines: env.FLEET_PIPELINES === 'fanout' ? FANOUT_PIPELINES : [FleetPipeline],
    concurrency: Number(env.FLEET_CONCURRENCY ?? 4),
    ...timings,
    onSettled: (event) => print({ event: 'settled', worker: workerId, runId: event.runId, disposition: event.disposition, detail: event.detail }),
  });
  print({ event: 'ready', worker: workerId, pid: process.pid });
  await worker.stopped;
  print({ event: 'stopped', worker: workerId, stats: worker.stats });
  await queue.close();
  await waypoint.close();
  await fleetEnv.close();
}

function print(line: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(line) + '\n');
}

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
}

main().catch((error: unknown) => {
  print({ event: 'error', message: error instanceof Error ? error.message : String(error), code: (error as { code?: unknown }).code ?? null });
  process.exitCode = 1;
});
