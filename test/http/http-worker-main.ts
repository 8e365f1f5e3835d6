/**
 * A fleet worker process for the HTTP fleet test: a Waypoint on the test's PostgreSQL schema and pg-boss
 * queue (from the environment, as test/queue's workers), running `HttpStory`. Prints `{"event":"ready"}`.
 *   HTTP_PG_SCHEMA, HTTP_WORKER, and the queue's FLEET_QUEUE*.
 */
import 'reflect-metadata';
import { ContainerModule } from 'inversify';
import { JsonLogger, TOKENS, Waypoint, postgresStorage } from '../../src/index';
import { RUN_QUEUE, startWorker } from '../../src/queue/index';
import { PG_TEST_URL } from '../helpers/pg-schema';
import { queueFromEnv } from '../queue/queue-backends';
import { HttpStory } from './http-fleet-pipeline';

async function main(): Promise<void> {
  const queue = queueFromEnv(process.env);
  const quiet = new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(new JsonLogger('error')));
  const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema: process.env.HTTP_PG_SCHEMA! }), quiet], leaseTtlMs: 2_000 });
  waypoint.container.bind(RUN_QUEUE).toConstantValue(queue);
  const worker = await startWorker(waypoint, { pipelines: [HttpStory], pollIntervalMs: 50, recoverOrphans: { everyMs: 500, stuckAfterMs: 1_000 } });
  process.stdout.write(JSON.stringify({ event: 'ready', worker: process.env.HTTP_WORKER }) + '\n');
  await worker.stopped;
  await queue.close();
  await waypoint.close();
}

main().catch((error: unknown) => {
  process.stdout.write(JSON.stringify({ event: 'error', message: error instanceof Error ? error.message : String(error) }) + '\n');
  process.exit(1);
});
