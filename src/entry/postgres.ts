/**
 * `waypoint-durable/postgres`: the PostgreSQL checkpoint store. `pg` (an optional peer) loads when the
 * store is constructed, not when this module is imported.
 *
 * @example
 * import { postgresStorage } from 'waypoint-durable/postgres';
 * const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: process.env.DATABASE_URL!, schema: 'waypoint' })] });
 */
export { postgresStorage } from '../storage/modules';
export { TypeOrmCheckpointStore } from '../storage/sql/typeorm-store';
export type { PostgresStoreOptions, StoreEntities } from '../storage/sql/options';
export type { GroupCommitOptions, GroupCommitStats } from '../storage/sql/group-commit';
