import 'reflect-metadata';
import { Client, type Notification } from 'pg';
import { Redis } from 'ioredis';
import { postgresStorage, Waypoint } from '../src/index';
import { redisStorage } from '../src/entry/redis';

/*
 * The reader process of the live-output bench (live-output.ts): it follows one run's stream in a
 * process of its own and, for every part, takes the time it arrived minus the time the writer put in
 * it (both `performance.timeOrigin + performance.now()`, one machine, one clock). Modes:
 * - `waypoint`: `waypoint.stream(runId)`, what a user's reader does;
 * - `pg-floor`: a bare LISTEN on a channel the writer NOTIFYs with the time (PostgreSQL's own wake-up);
 * - `redis-floor`: a bare XREAD BLOCK on a stream the writer XADDs the time to (Redis's own wake-up).
 * Prints 'ready' once listening, then one JSON line: the latencies in ms.
 */

const now = () => performance.timeOrigin + performance.now();

async function followWaypoint(backend: string, place: string, runId: string, pgUrl: string, redisUrl: string): Promise<number[]> {
  const storage = backend === 'postgres' ? postgresStorage({ url: pgUrl, schema: place, poolSize: 2 }) : redisStorage({ url: redisUrl, keyPrefix: place });
  const waypoint = await Waypoint.create({ modules: [storage] });
  const latencies: number[] = [];
  try {
    const stream = waypoint.stream(runId, { idleCheckMs: 200 });
    process.stdout.write('ready\n');
    for await (const event of stream) {
      const at = now();
      if (event.kind === 'part') latencies.push(at - (event.data as { t: number }).t);
    }
  } finally {
    await waypoint.close();
  }
  return latencies;
}

async function followPgFloor(channel: string, count: number, pgUrl: string): Promise<number[]> {
  const client = new Client({ connectionString: pgUrl });
  await client.connect();
  const latencies: number[] = [];
  const done = new Promise<void>((resolve) =>
    client.on('notification', (m: Notification) => {
      latencies.push(now() - Number(m.payload));
      if (latencies.length === count) resolve();
    }),
  );
  await client.query(`LISTEN "${channel}"`);
  process.stdout.write('ready\n');
  await done;
  await client.end();
  return latencies;
}

async function followRedisFloor(key: string, count: number, redisUrl: string): Promise<number[]> {
  const client = new Redis(redisUrl);
  const latencies: number[] = [];
  let last = '0-0';
  process.stdout.write('ready\n');
  while (latencies.length < count) {
    const reply = await client.xread('BLOCK', 5000, 'STREAMS', key, last);
    for (const [, entries] of reply ?? []) {
      for (const [id, fields] of entries) {
        latencies.push(now() - Number(fields[1]));
        last = id;
      }
    }
  }
  client.disconnect();
  return latencies;
}

async function main(): Promise<void> {
  const [mode, backend, place, runIdOrKey, count, pgUrl, redisUrl] = process.argv.slice(2);
  const latencies =
    mode === 'waypoint'
      ? await followWaypoint(backend, place, runIdOrKey, pgUrl, redisUrl)
      : mode === 'pg-floor'
        ? await followPgFloor(runIdOrKey, Number(count), pgUrl)
        : await followRedisFloor(runIdOrKey, Number(count), redisUrl);
  process.stdout.write(`${JSON.stringify({ latencies })}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
