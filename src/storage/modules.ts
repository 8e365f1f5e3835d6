import { ContainerModule } from 'inversify';
import { TOKENS } from '../contract/tokens';
import { MemoryCheckpointStore } from './memory-store';
import { type PostgresStoreOptions, type SqliteSynchronous, type StoreEntities, type TypeOrmStoreOptions, resolveOptions } from './sql/options';
import { TypeOrmCheckpointStore } from './sql/typeorm-store';

/**
 * In-memory checkpoint store (tests, experiments): nothing survives the process.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
 */
export function memoryStorage(): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(new MemoryCheckpointStore());
  });
}

/**
 * Embedded SQLite checkpoint store (the default): one file, WAL mode, every step committed and fsynced
 * before the next starts (`synchronous: 'FULL'`). The file defaults to `./.waypoint/waypoint.db` under the
 * working directory; its directory is created. The runtime calls `init()` (migrations) and `close()`.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: '/var/lib/reports/waypoint.db' })] });
 */
export function sqliteStorage(
  options: { path?: string; synchronous?: SqliteSynchronous; busyTimeoutMs?: number; tablePrefix?: string; entities?: StoreEntities } = {},
): ContainerModule {
  const storeOptions: TypeOrmStoreOptions = { type: 'sqlite', ...options };
  resolveOptions(storeOptions); // a bad option fails here, when the module is configured, not at first use
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(new TypeOrmCheckpointStore(storeOptions));
  });
}

/**
 * PostgreSQL checkpoint store: steps, runs and the committed-operations log in `schema` (created if
 * absent), leases fenced by epoch, one round trip per step append. Appends of concurrent runs that are
 * ready together share one statement and one commit (`groupCommit`, on by default).
 *
 * @example
 * const waypoint = await Waypoint.create({
 *   modules: [postgresStorage({ url: process.env.DATABASE_URL!, schema: 'waypoint', poolSize: 20 })],
 * });
 */
export function postgresStorage(options: Omit<PostgresStoreOptions, 'type'>): ContainerModule {
  const storeOptions: TypeOrmStoreOptions = { type: 'postgres', ...options };
  resolveOptions(storeOptions);
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(new TypeOrmCheckpointStore(storeOptions));
  });
}

export { redisStorage } from './redis/module';
export { tieredStorage } from './tiered/module';
