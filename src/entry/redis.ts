/**
 * `waypoint-durable/redis`: the Redis checkpoint store. `ioredis` (an optional peer) loads when the store
 * is constructed, not when this module is imported.
 *
 * @example
 * import { redisStorage } from 'waypoint-durable/redis';
 * const waypoint = await Waypoint.create({ modules: [redisStorage({ url: 'redis://cache:6379', keyPrefix: 'reports:' })] });
 */
export { redisStorage } from '../storage/redis/module';
export { RedisCheckpointStore, type RedisStoreOptions } from '../storage/redis/redis-store';
