/**
 * `waypoint-durable/sqlite`: the embedded SQLite checkpoint store (the default). Loads no PostgreSQL,
 * Redis or queue client.
 *
 * @example
 * import { sqliteStorage } from 'waypoint-durable/sqlite';
 * const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: './.waypoint/waypoint.db' })] });
 */
export { sqliteStorage } from '../storage/modules';
export { TypeOrmCheckpointStore } from '../storage/sql/typeorm-store';
export type { SqliteStoreOptions, SqliteSynchronous, StoreEntities } from '../storage/sql/options';
