// A reader of a run's live output in a process of its own (test/composition/run-stream-suite.ts):
// opens the store the JSON spec names, follows `waypoint.stream(runId)` from offset 0 and prints each
// event as a JSON line. With a session size above 0 it breaks out after that many events and
// reconnects with `from` (the last offset seen + 1), as a page that reloads does.
import 'reflect-metadata';
import type { ContainerModule } from 'inversify';
import { Waypoint, postgresStorage, sqliteStorage, tieredStorage, type RunStreamEvent } from '../../src/index';
import { redisStorage } from '../../src/storage/redis/module';
import type { ChildSpec } from '../composition/run-stream-suite';

const PG_URL = process.env.WAYPOINT_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

function modulesFor(spec: ChildSpec): ContainerModule[] {
  switch (spec.kind) {
    case 'sqlite':
      return [sqliteStorage({ path: spec.file })];
    case 'postgres':
      return [postgresStorage({ url: PG_URL, schema: spec.schema, poolSize: 2 })];
    case 'redis':
      return [redisStorage({ url: REDIS_URL, keyPrefix: spec.prefix })];
    default:
      return [tieredStorage({ redis: { url: REDIS_URL, keyPrefix: spec.prefix }, postgres: { url: PG_URL, schema: spec.schema, poolSize: 2 } })];
  }
}

async function main(): Promise<void> {
  const [specJson, runId, sessionArg] = process.argv.slice(2);
  const spec = JSON.parse(specJson) as ChildSpec;
  const encryption = spec.encrypted ? { encryption: { keys: { k1: Buffer.alloc(32, 7) }, activeKeyId: 'k1' } } : {};
  const waypoint = await Waypoint.create({ modules: modulesFor(spec), ...encryption });
  const sessionSize = Number(sessionArg);
  let next = 0;
  try {
    for (let ended = false; !ended;) {
      ended = true;
      let inSession = 0;
      for await (const event of waypoint.stream(runId, { from: next, idleCheckMs: 100 })) {
        process.stdout.write(`${JSON.stringify(event satisfies RunStreamEvent)}\n`);
        next = event.offset + 1;
        if (sessionSize > 0 && ++inSession === sessionSize) {
          ended = false;
          break;
        }
      }
    }
  } finally {
    await waypoint.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
