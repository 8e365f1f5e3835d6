// A reader in a process of its own for test/storage/stream-cross-process.test.ts: opens the store the
// arguments name, prints 'waiting', waits for the run's stream to reach the offset (bounded by a
// generous timeout), then prints one JSON line with the outcome and the events it then reads.
import 'reflect-metadata';
import type { CheckpointStore } from '../../src/contract/checkpoint-store';
import { RedisCheckpointStore } from '../../src/storage/redis/redis-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';

async function main(): Promise<void> {
  const [backend, location, runId, from] = process.argv.slice(2);
  const store: CheckpointStore =
    backend === 'postgres'
      ? new TypeOrmCheckpointStore({ type: 'postgres', url: process.env.WAYPOINT_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test', schema: location, poolSize: 2 })
      : new RedisCheckpointStore({ url: process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', keyPrefix: location });
  await store.init();
  try {
    process.stdout.write('waiting\n');
    const woke = await store.waitForEvents!(runId, Number(from), AbortSignal.timeout(20_000));
    const events = await store.readEvents!(runId, Number(from), 100);
    process.stdout.write(`${JSON.stringify({ woke, events })}\n`);
  } finally {
    await store.close();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`);
  process.exit(1);
});
