/**
 * `waypoint-durable/postgres`: the PostgreSQL checkpoint store. `pg` (an optional peer) loads when the
 * store is constructed, not when this module is imported.
 *
 * @example
 * import { postgresStorage } from 'waypoint-durable/postgres';
 * const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: process.env.DATABASE_URL!, schema: 'waypoint' })] });
 */
export { postgresStorage } from '../storage/modules';
export { TypeOrmCheckpointStore } from '../storage/typeorm/typeorm-store';
export type { PostgresStoreOptions, StoreEntities } from '../storage/typeorm/options';
export type { GroupCommitOptions, GroupCommitStats } from '../storage/typeorm/group-commit';
