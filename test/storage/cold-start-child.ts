import 'reflect-metadata';
import { Agent, Pipeline, Step, TypeOrmCheckpointStore, Waypoint, postgresStorage, sqliteStorage, tieredStorage } from '../../src/index';
import type { TypeOrmStoreOptions } from '../../src/storage/sql/options';

/*
 * A program in a process of its own (spawned by cold-start.test.ts and cold-start-postgres.test.ts): runs
 * a one-step pipeline on the store argv[2] names (a SQLite file path, or `postgres://...?schema=name`) with
 * run id argv[3], reads the runs back through a second store, and with argv[4] === 'data-source' uses
 * `store.dataSource` too (a query, and on PostgreSQL a transaction); with argv[4] === 'tiered' the run goes
 * through the tiered store (Redis at WAYPOINT_TEST_REDIS_URL, keys under argv[5]) on that PostgreSQL schema. Prints one JSON line: the run's status,
 * the runs listed, and which TypeORM modules the process loaded (from require.cache).
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

/** The store argv[2] names, and the steps table as SQL names it there. */
function target(where: string): { options: TypeOrmStoreOptions; steps: string } {
  if (!where.startsWith('postgres://')) return { options: { type: 'sqlite', path: where }, steps: 'waypoint_steps' };
  const url = new URL(where);
  const schema = url.searchParams.get('schema')!;
  url.searchParams.delete('schema');
  return { options: { type: 'postgres', url: url.toString(), schema }, steps: `"${schema}".waypoint_steps` };
}

async function readSteps(store: TypeOrmCheckpointStore, table: string): Promise<unknown> {
  const sql = `SELECT run_id, step_name FROM ${table} ORDER BY run_id, sequence`;
  if (store.backend === 'sqlite') return store.dataSource.query(sql);
  // On PostgreSQL also a transaction: a query runner of its own on the pool TypeORM adopted.
  return store.dataSource.transaction((manager) => manager.query(sql));
}

async function main(where: string, runId: string, mode: string | undefined): Promise<void> {
  const { options, steps: table } = target(where);
  const module =
    options.type === 'sqlite'
      ? sqliteStorage({ path: options.path })
      : mode === 'tiered'
        ? tieredStorage({ postgres: { url: options.url, schema: options.schema }, redis: { url: process.env.WAYPOINT_TEST_REDIS_URL, keyPrefix: process.argv[5] } })
        : postgresStorage({ url: options.url, schema: options.schema });
  const waypoint = await Waypoint.create({ modules: [module] });
  const result = await waypoint.run(ColdStart, { runId, input: {} });
  await waypoint.close();
  const afterRun = typeormModules().length;
  const store = new TypeOrmCheckpointStore(options);
  await store.init();
  const runs = (await store.listRuns()).map((run) => run.runId).sort();
  let steps: unknown;
  if (mode === 'data-source') steps = await readSteps(store, table);
  await store.close();
  process.stdout.write(JSON.stringify({ status: result.status, runs, steps, afterRun, typeorm: typeormModules().length }) + '\n');
}

main(process.argv[2], process.argv[3], process.argv[4]).catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
