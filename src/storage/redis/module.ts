import { ContainerModule } from 'inversify';
import { TOKENS } from '../../contract/tokens';
import { RedisCheckpointStore, type RedisStoreOptions } from './redis-store';

/**
 * Binds the checkpoint store to Redis. Read {@link RedisCheckpointStore} on durability first: without
 * AOF (`appendonly yes`, `appendfsync always`) a Redis restart loses the runs; prefer tiered storage
 * when the runs must survive one.
 *
 * @example
 * const waypoint = await Waypoint.create({
 *   modules: [redisStorage({ url: 'redis://cache:6379', keyPrefix: 'reports:', finishedRunTtlSeconds: 86_400 })],
 * });
 */
export function redisStorage(options: RedisStoreOptions = {}): ContainerModule {
  // Built here, not in the callback, so a bad option fails when the module is configured.
  const store = new RedisCheckpointStore(options);
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
  });
}
