/**
 * The crash harness's worker: runs (or resumes) one run of the effects pipeline in this process and prints
 * its RunResult as the last JSON line; on failure `{"error":{...}}` and exit code 1. The harness spawns it
 * and kills it.
 *
 *   node dist-NAME/test/crash/effects-worker.js <runId>
 *
 * Environment: EFFECTS_DB (SQLite file) or EFFECTS_PG_URL + EFFECTS_PG_SCHEMA; EFFECTS_HTTP_URL (the
 * test's API); EFFECTS_JOURNAL (JSON-lines file); EFFECTS_KILL_AT_TICK (SIGKILL at the Nth point, see
 * Ticker); EFFECTS_STEP_DELAY_MS; WAYPOINT_WORKER_ID; and the runtime's WAYPOINT_FAULT.
 */
import 'reflect-metadata';
import { ContainerModule } from 'inversify';
import { NoopTelemetry, TOKENS, Waypoint, WaypointError, type CheckpointStore, type Logger, type StepEvent, type Telemetry } from '../../src/index';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { ledgerTables } from '../effects/ledger';
import { EffectsPipeline, Journal, effectsPipelineModule } from './effects-pipeline';
import { Ticker, tickingStore } from './ticking-store';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** Journals each durable checkpoint: a step journaled here must never start again in a later process. */
class JournalTelemetry implements Telemetry {
  private readonly quiet = new NoopTelemetry();
  constructor(private readonly journal: Journal) {}
  stepCompleted(event: StepEvent): void {
    this.journal.write({ event: 'checkpointed', step: event.step });
  }
  runStarted(): void {}
  stepFailed(): void {}
  sideEffect(): void {}
  runEnded(): void {}
  leaseLost(): void {}
  span<T>(name: string, attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T> {
    return this.quiet.span(name, attributes, fn);
  }
}

function storeFromEnv(env: NodeJS.ProcessEnv): { store: CheckpointStore; dialect: 'sqlite' | 'postgres'; schema?: string } {
  if (env.EFFECTS_PG_URL) {
    const schema = env.EFFECTS_PG_SCHEMA || undefined;
    return { store: new TypeOrmCheckpointStore({ type: 'postgres', url: env.EFFECTS_PG_URL, schema, poolSize: 4 }), dialect: 'postgres', schema };
  }
  if (!env.EFFECTS_DB) throw new Error('set EFFECTS_DB (SQLite file) or EFFECTS_PG_URL');
  return { store: new TypeOrmCheckpointStore({ type: 'sqlite', path: env.EFFECTS_DB }), dialect: 'sqlite' };
}

async function main(): Promise<void> {
  const env = process.env;
  const runId = process.argv[2];
  if (!runId) throw new Error('usage: effects-worker <runId>');
  const journal = new Journal(env.EFFECTS_JOURNAL || null);
  const ticker = new Ticker(Number(env.EFFECTS_KILL_AT_TICK || 0), (tick, label) => journal.write({ event: 'kill', tick, label }));
  const { store, dialect, schema } = storeFromEnv(env);
  const waypoint = await Waypoint.create({
    modules: [
      new ContainerModule(({ bind }) => {
        bind(TOKENS.CheckpointStore).toConstantValue(tickingStore(store, ticker.tick));
        bind(TOKENS.Logger).toConstantValue(silent);
        bind(TOKENS.Telemetry).toConstantValue(new JournalTelemetry(journal));
      }),
      effectsPipelineModule({
        httpUrl: env.EFFECTS_HTTP_URL ?? '',
        ledger: ledgerTables(dialect, schema),
        journal,
        tick: ticker.tick,
        stepDelayMs: Number(env.EFFECTS_STEP_DELAY_MS || 0),
      }),
    ],
    workerId: env.WAYPOINT_WORKER_ID || undefined,
    // `--durability async` of the crash-test CLI (and the async crash tests): rows written behind the next step.
    durability: env.WAYPOINT_CRASH_DURABILITY === 'async' ? 'async' : 'sync',
  });
  try {
    process.stdout.write('{"started":true}\n');
    const result = await waypoint.run(EffectsPipeline, { runId, input: { runId } });
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
