import 'reflect-metadata';
import { Agent, Pipeline, Step, TypeOrmCheckpointStore, Waypoint, sqliteStorage } from '../../src/index';

/*
 * A SQLite program in a process of its own (spawned by cold-start.test.ts): runs a one-step pipeline on
 * the file named by argv[2] with run id argv[3], reads the runs back through a second store, and with
 * argv[4] === 'data-source' uses `store.dataSource` too. Prints one JSON line: the run's status, the runs
 * listed, and which TypeORM modules the process loaded (from require.cache).
 */
class Only extends Agent {
  @Step()
  go(): Promise<{ done: boolean }> {
    return Promise.resolve({ done: true });
  }
}

@Pipeline({ name: 'cold-start', version: '1', agents: [Only] })
class ColdStart {}

function typeormModules(): string[] {
  return Object.keys(require.cache).filter((file) => /[\\/]node_modules[\\/]typeorm[\\/]/.test(file));
}

async function main(file: string, runId: string, mode: string | undefined): Promise<void> {
  const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: file })] });
  const result = await waypoint.run(ColdStart, { runId, input: {} });
  await waypoint.close();
  const afterRun = typeormModules().length;
  const store = new TypeOrmCheckpointStore({ type: 'sqlite', path: file });
  await store.init();
  const runs = (await store.listRuns()).map((run) => run.runId).sort();
  let steps: unknown;
  if (mode === 'data-source') steps = await store.dataSource.query('SELECT run_id, step_name FROM waypoint_steps ORDER BY run_id, sequence');
  await store.close();
  process.stdout.write(JSON.stringify({ status: result.status, runs, steps, afterRun, typeorm: typeormModules().length }) + '\n');
}

main(process.argv[2], process.argv[3], process.argv[4]).catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
