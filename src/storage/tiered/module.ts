import { ContainerModule } from 'inversify';
import { TOKENS } from '../../contract/tokens';
import { resolveTieredOptions, type TieredStorageOptions } from './options';
import { TieredCheckpointStore } from './tiered-store';
import { WriteBehindCheckpointStore } from './write-behind-store';

/**
 * Binds the checkpoint store to PostgreSQL behind Redis. Default, write-through
 * ({@link TieredCheckpointStore}): every step is committed in PostgreSQL before the run moves on,
 * checkpoint loads read the step rows from Redis, and a Redis outage only slows things down
 * (`store.stats.redisFallbacks` counts it, the logger warns); leases and fencing are PostgreSQL's.
 * `mode: 'write-behind'` ({@link WriteBehindCheckpointStore}): steps land in Redis and reach PostgreSQL
 * through a journal shortly after; read its loss window first. Warnings go to the container's Logger
 * binding unless `logger` is given.
 *
 * @example
 * const waypoint = await Waypoint.create({
 *   modules: [tieredStorage({ redis: { url: 'redis://cache:6379' }, postgres: { url: process.env.DATABASE_URL!, schema: 'waypoint' } })],
 * });
 * // Redis first, PostgreSQL a few milliseconds later:
 * tieredStorage({ mode: 'write-behind', redis: { url: 'redis://cache:6379' }, postgres: { url: pgUrl }, writeBehind: { blockMs: 20 } });
 */
export function tieredStorage(options: TieredStorageOptions): ContainerModule {
  const resolved = resolveTieredOptions(options); // a bad option fails here, when the module is configured
  const store = resolved.mode === 'write-behind' ? new WriteBehindCheckpointStore(options) : new TieredCheckpointStore(options);
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore)
      .toDynamicValue((context) => {
        const logger = options.logger ?? context.get(TOKENS.Logger, { optional: true });
        if (logger) store.useLogger(logger);
        return store;
      })
      .inSingletonScope();
  });
}
