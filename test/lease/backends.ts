import { createHash, randomUUID } from 'node:crypto';
import { ContainerModule } from 'inversify';
import { Redis } from 'ioredis';
import type { LogFields, Logger } from '../../src/contract/logger';
import { TOKENS } from '../../src/contract/tokens';
import type { CheckpointStore } from '../../src/contract/checkpoint-store';
import { RedisCheckpointStore } from '../../src/storage/redis/redis-store';
import { TieredCheckpointStore } from '../../src/storage/tiered/tiered-store';
import { WriteBehindCheckpointStore } from '../../src/storage/tiered/write-behind-store';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';

/**
 * The backends the lease and fault tests run against, each isolated per test (a PostgreSQL schema named
 * from the test, a random Redis key prefix) and reachable the same way from the test process and from
 * worker processes (through `WP_*` environment variables), so both sides open the same data.
 */
export type BackendName = 'postgres' | 'redis' | 'tiered' | 'write-behind';

export const REDIS_TEST_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** What a worker needs to open the test's store: `WP_BACKEND`, `WP_PG_URL`, `WP_PG_SCHEMA`, `WP_REDIS_URL`, `WP_REDIS_PREFIX`. */
export type BackendEnv = Record<string, string>;

export interface IsolatedBackend {
  name: BackendName;
  env: BackendEnv;
  /** A new store on the test's data (not initialized). */
  open(): CheckpointStore;
  /** Drops the schema and deletes every key under the prefix. */
  dispose(): Promise<void>;
}

/** Opens the store an environment describes (the worker's side of {@link isolatedBackend}). */
export function storeFromEnv(env: NodeJS.ProcessEnv | BackendEnv): CheckpointStore {
  const pg = { url: env.WP_PG_URL ?? PG_TEST_URL, schema: env.WP_PG_SCHEMA, poolSize: 3 };
  const redis = { url: env.WP_REDIS_URL ?? REDIS_TEST_URL, keyPrefix: env.WP_REDIS_PREFIX };
  switch (env.WP_BACKEND) {
    case 'postgres':
      return new TypeOrmCheckpointStore({ type: 'postgres', ...pg });
    case 'redis':
      return new RedisCheckpointStore({ ...redis, commandTimeoutMs: 2_000 });
    case 'tiered':
      return new TieredCheckpointStore({ redis, postgres: pg });
    case 'write-behind':
      return new WriteBehindCheckpointStore({ redis, postgres: pg, writeBehind: { blockMs: 20 } });
    default:
      throw new Error(`WP_BACKEND must be postgres, redis, tiered or write-behind (got ${String(env.WP_BACKEND)})`);
  }
}

/** A container module binding `store`. */
export function storeModule(store: CheckpointStore): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
  });
}

/**
 * A fresh, isolated namespace of `name` for one test. `urls` points the test at proxies of its own.
 *
 * @example
 * const backend = await isolatedBackend('tiered', 'split-brain: rounds');
 * spawnNode(WORKER, [], backend.env);
 */
export async function isolatedBackend(name: BackendName, testName: string, urls: { pg?: string; redis?: string } = {}): Promise<IsolatedBackend> {
  const schema = schemaFor(`${name}: ${testName}`);
  const prefix = `wp-test:${name}:${createHash('sha256').update(testName).digest('hex').slice(0, 8)}-${randomUUID().slice(0, 8)}:`;
  const env: BackendEnv = { WP_BACKEND: name, WP_PG_URL: urls.pg ?? PG_TEST_URL, WP_PG_SCHEMA: schema, WP_REDIS_URL: urls.redis ?? REDIS_TEST_URL, WP_REDIS_PREFIX: prefix };
  if (name !== 'redis') await dropSchema(schema);
  return {
    name,
    env,
    open: () => storeFromEnv(env),
    dispose: async () => {
      if (name !== 'redis') await dropSchema(schema);
      if (name !== 'postgres') await deleteKeysUnder(prefix);
    },
  };
}

/** Deletes every key under `prefix` (test cleanup; SCAN is fine here, the stores never scan). */
export async function deleteKeysUnder(prefix: string, url = REDIS_TEST_URL): Promise<void> {
  const client = new Redis(url);
  try {
    const keys: string[] = [];
    for await (const batch of client.scanStream({ match: `${prefix}*`, count: 500 })) keys.push(...(batch as string[]));
    for (let i = 0; i < keys.length; i += 500) await client.del(...keys.slice(i, i + 500));
  } finally {
    client.disconnect();
  }
}

/** A logger that keeps warnings and errors, so tests can assert what was reported. */
export class MemoryLogger implements Logger {
  readonly warnings: { message: string; fields?: LogFields }[] = [];
  debug(): void {}
  info(): void {}
  warn(message: string, fields?: LogFields): void {
    this.warnings.push({ message, fields });
  }
  error(message: string, fields?: LogFields): void {
    this.warnings.push({ message, fields });
  }
}
