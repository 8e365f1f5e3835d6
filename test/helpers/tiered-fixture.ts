import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import type { CheckpointStore } from '../../src/contract/checkpoint-store';
import { PG_TEST_URL, dropSchema, schemaFor } from './pg-schema';
import { deleteKeysUnder } from '../lease/backends';

/** Where a two-tier store lives for one test: its own PostgreSQL schema and Redis key prefix. */
export interface TierPlace {
  schema: string;
  prefix: string;
  pgUrl: string;
}

/**
 * A conformance fixture for a store on Redis + PostgreSQL: a fresh schema (named from the test) and a
 * fresh key prefix, every store `open` makes on that same place (so `sibling` shares it), all of it
 * removed afterwards.
 *
 * @example
 * runStoreConformance({ name: 'tiered', makeStore: (name) => twoTierFixture(name, 'tier', (p) => new TieredCheckpointStore({ ... })) });
 */
export async function twoTierFixture(testName: string, tag: string, make: (place: TierPlace) => CheckpointStore) {
  const place: TierPlace = {
    schema: schemaFor(testName),
    prefix: `wp-test:${tag}:${createHash('sha256').update(testName).digest('hex').slice(0, 10)}-${randomUUID().slice(0, 8)}:`,
    pgUrl: PG_TEST_URL,
  };
  await dropSchema(place.schema);
  const stores: CheckpointStore[] = [];
  const open = () => {
    stores.push(make(place));
    return stores.at(-1)!;
  };
  return {
    store: open(),
    sibling: open,
    cleanup: async () => {
      await Promise.all(stores.map((s) => s.close()));
      await dropSchema(place.schema);
      await deleteKeysUnder(place.prefix);
    },
  };
}

/**
 * A redis-server of the test's own (its own port and temp dir, never the shared server): no AOF and no
 * automatic RDB snapshots, so SIGKILL loses everything it holds. `save()` writes a snapshot (dump.rdb in
 * its dir) that the next `boot()` starts from, as a Redis restarted from an older snapshot does.
 */
export class PrivateRedis {
  private process: ChildProcess | undefined;
  private constructor(
    readonly port: number,
    private readonly dir: string,
  ) {}

  static async start(): Promise<PrivateRedis> {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port: free } = probe.address() as { port: number };
        probe.close(() => resolve(free));
      });
    });
    const redis = new PrivateRedis(port, mkdtempSync(join(tmpdir(), 'waypoint-redis-')));
    await redis.boot();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async boot(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir, '--daemonize', 'no'];
    this.process = spawn('redis-server', args, { stdio: 'ignore' });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const probe = new Redis(this.url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      probe.on('error', () => {});
      try {
        await probe.connect();
        await probe.ping();
        return;
      } catch (error) {
        if (Date.now() > deadline || this.process.exitCode !== null) throw new Error(`private redis-server on ${this.port} did not start: ${String(error)}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      } finally {
        probe.disconnect();
      }
    }
  }

  /** SIGKILL: the server dies with everything it held in memory. */
  async crash(): Promise<void> {
    const child = this.process;
    if (!child || child.exitCode !== null) return;
    await new Promise<void>((resolve) => (child.once('exit', () => resolve()), child.kill('SIGKILL')));
  }

  /** SAVE: a snapshot of everything it holds now, loaded by the next boot. */
  async save(): Promise<void> {
    await this.command((client) => client.save());
  }

  /** SHUTDOWN NOSAVE: stops without a new snapshot, so the next boot starts from the last `save()`. */
  async shutdownNoSave(): Promise<void> {
    const child = this.process;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    await this.command((client) => client.shutdown('NOSAVE')).catch(() => undefined); // the connection closes under the reply
    await exited;
  }

  /** FLUSHALL: everything gone, as when Redis evicts or expires a run. */
  async flushAll(): Promise<void> {
    await this.command((client) => client.flushall());
  }

  private async command<T>(work: (client: Redis) => Promise<T>): Promise<T> {
    const client = new Redis(this.url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    client.on('error', () => {});
    try {
      await client.connect();
      return await work(client);
    } finally {
      client.disconnect();
    }
  }

  async stop(): Promise<void> {
    await this.crash();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
