/**
 * The control-flow crash worker: runs (or resumes) one run of the control-flow pipeline in this process
 * and prints its RunResult as the last JSON line; on failure `{"error":{...}}` and exit code 1. The
 * harness (flow-harness.ts) spawns it and kills it.
 *
 *   node dist/test/crash/flow-worker.js <runId>
 *
 * Environment: EFFECTS_DB (SQLite file) or EFFECTS_PG_URL + EFFECTS_PG_SCHEMA (the checkpoints and the
 * ledger, side by side); FLOW_SEED and FLOW_PROCESS (the step delays' stream), FLOW_MAX_DELAY_MS,
 * FLOW_ITEMS, FLOW_CUSTOMERS; WAYPOINT_WORKER_ID.
 */
import 'reflect-metadata';
import { ContainerModule } from 'inversify';
import { TOKENS, Waypoint, WaypointError, postgresStorage, sqliteStorage, type Logger } from '../../src/index';
import { ledgerTables } from '../effects/ledger';
import { FLOW_SIZE, FlowCrashPipeline, flowInput, flowPipelineModule, seededDelay } from './flow-pipeline';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

function storage(env: NodeJS.ProcessEnv): { module: ContainerModule; dialect: 'sqlite' | 'postgres'; schema?: string } {
  if (env.EFFECTS_PG_URL) {
    const schema = env.EFFECTS_PG_SCHEMA || undefined;
    return { module: postgresStorage({ url: env.EFFECTS_PG_URL, schema, poolSize: 6 }), dialect: 'postgres', schema };
  }
  if (!env.EFFECTS_DB) throw new Error('set EFFECTS_DB (SQLite file) or EFFECTS_PG_URL');
  return { module: sqliteStorage({ path: env.EFFECTS_DB }), dialect: 'sqlite' };
}

async function main(): Promise<void> {
  const env = process.env;
  const runId = process.argv[2];
  if (!runId) throw new Error('usage: flow-worker <runId>');
  const { module, dialect, schema } = storage(env);
  const delay = seededDelay(Number(env.FLOW_SEED || 0), Number(env.FLOW_PROCESS || 0), Number(env.FLOW_MAX_DELAY_MS || 0));
  const waypoint = await Waypoint.create({
    modules: [module, new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent)), flowPipelineModule(ledgerTables(dialect, schema), delay)],
    pipelines: [FlowCrashPipeline],
    workerId: env.WAYPOINT_WORKER_ID || undefined,
    durability: env.WAYPOINT_CRASH_DURABILITY === 'async' ? 'async' : 'sync',
  });
  try {
    process.stdout.write('{"started":true}\n');
    const size = { items: Number(env.FLOW_ITEMS || FLOW_SIZE.items), customers: Number(env.FLOW_CUSTOMERS || FLOW_SIZE.customers) };
    const result = await waypoint.run(FlowCrashPipeline, { runId, input: flowInput(runId, size) });
    process.stdout.write(JSON.stringify(result) + '\n');
  } finally {
    await waypoint.close();
  }
}

main().catch((error: unknown) => {
  const described =
    error instanceof WaypointError
      ? { code: error.code, name: error.name, message: error.message }
      : { code: null, name: error instanceof Error ? error.name : 'Error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) };
  process.stdout.write(JSON.stringify({ error: described }) + '\n');
  process.exitCode = 1;
});
