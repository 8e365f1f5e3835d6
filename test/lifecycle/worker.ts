/**
 * The child process of the lifecycle tests. One command per process:
 *
 *   node worker.js run <runId>                      runUntilSignal(LifecyclePipeline): starts or resumes
 *   node worker.js cancel <runId> [reason]          waypoint.cancel from another process
 *   node worker.js signal <runId> <name> <json>     waypoint.signal from another process
 *
 * Everything else comes from LIFECYCLE_WORKER (JSON, see WorkerConfig). The last stdout line is the
 * outcome as JSON; a failure prints `{"outcome":"error","error":{code,name,message}}` and exits 1.
 * The `run` command ends the natural way (no process.exit): whether the process then exits promptly is
 * part of what the tests check.
 */
import 'reflect-metadata';
import type { ContainerModule } from 'inversify';
import { Waypoint, WaypointError, postgresStorage, sqliteStorage } from '../../src/index';
import { INPUT, LifecyclePipeline, lifecycleModule, logEvent } from './pipeline';
import { WORKER_ENV, type WorkerConfig } from './worker-config';

type Listeners = { SIGTERM: number; SIGINT: number };
const listeners = (): Listeners => ({ SIGTERM: process.listenerCount('SIGTERM'), SIGINT: process.listenerCount('SIGINT') });

async function main(): Promise<void> {
  const config = JSON.parse(process.env[WORKER_ENV] ?? 'null') as WorkerConfig | null;
  if (!config) throw new Error(`${WORKER_ENV} is not set`);
  const [command, runId, ...rest] = process.argv.slice(2);
  if (!runId) throw new Error('usage: worker.js run|cancel|signal <runId> ...');
  const storage: ContainerModule = 'sqlite' in config.store ? sqliteStorage({ path: config.store.sqlite }) : postgresStorage(config.store.pg);
  const waypoint = await Waypoint.create({
    modules: [lifecycleModule(config.steps), storage],
    workerId: config.workerId,
    leaseTtlMs: config.leaseTtlMs,
    heartbeatMs: config.heartbeatMs,
  });
  try {
    if (command === 'run') {
      if (config.hostHandler) process.on('SIGTERM', () => logEvent(config.steps.log, 'host', 'host-sigterm'));
      const before = listeners();
      const viaRun = config.deadlineVia === 'run';
      const at = config.deadlineInMs === undefined ? undefined : Date.now() + config.deadlineInMs;
      const deadline = { deadline: at, deadlineBufferMs: config.deadlineBufferMs };
      const result = await waypoint.runUntilSignal(
        LifecyclePipeline,
        { runId, input: INPUT, gracePeriodMs: config.gracePeriodMs, ...(viaRun ? deadline : {}) },
        viaRun ? {} : deadline,
      );
      print({ outcome: 'result', result, exitCode: process.exitCode ?? 0, listeners: { before, after: listeners() }, deadline: at });
    } else if (command === 'cancel') {
      print({ outcome: 'cancelled', info: await waypoint.cancel(runId, rest[0]) });
    } else if (command === 'signal') {
      print({ outcome: 'signalled', delivered: await waypoint.signal(runId, rest[0], JSON.parse(rest[1] ?? 'null')) });
    } else {
      throw new Error(`unknown command '${command}'`);
    }
  } finally {
    await waypoint.close();
  }
}

function print(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + '\n');
}

main().catch((error: unknown) => {
  const described =
    error instanceof WaypointError
      ? { code: error.code, name: error.name, message: error.message }
      : { code: null, name: error instanceof Error ? error.name : 'Error', message: error instanceof Error ? error.message : String(error) };
  print({ outcome: 'error', error: described });
  process.exitCode = 1;
});
