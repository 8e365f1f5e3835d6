/**
 * `waypoint-durable/tiered`: PostgreSQL as the source of truth with Redis in front (write-through), or
 * Redis taking the writes and a journal carrying them to PostgreSQL (write-behind). `pg` and `ioredis`
 * load when a store is constructed.
 *
 * @example
 * import { tieredStorage } from 'waypoint-durable/tiered';
 * const waypoint = await Waypoint.create({ modules: [tieredStorage({ redis: { url: REDIS_URL }, postgres: { url: DATABASE_URL } })] });
 */
export { tieredStorage } from '../storage/tiered/module';
export { TieredCheckpointStore, TierCopyNotDroppedError } from '../storage/tiered/tiered-store';
export { WriteBehindCheckpointStore } from '../storage/tiered/write-behind-store';
export { TierDivergedError } from '../contract/errors';
export type { TieredStorageOptions, TieredMode, TieredRedisOptions, TieredPostgresOptions, WriteBehindOptions } from '../storage/tiered/options';
