import { ContainerModule } from 'inversify';
import { postgresStorage, redisStorage, sqliteStorage, tieredStorage, TOKENS, Waypoint, type Logger, type WaypointOptions } from '../../src/index';
import { PG_TEST_URL } from '../helpers/pg-schema';
import { REDIS_TEST_URL } from '../lease/backends';

/*
 * Where the live-output crash test keeps one case's data, as the test and its children (the workers that
 * run and resume the run, the reader that follows its stream) open it: a SQLite file, a PostgreSQL schema,
 * a Redis key prefix, or a schema and a prefix for the tiered store.
 */
export type LiveBackend = 'sqlite' | 'postgres' | 'redis' | 'tiered';

export interface LivePlace {
  backend: LiveBackend;
  file?: string;
  schema?: string;
  prefix?: string;
}

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** The storage module of `place`. */
export function liveStorage(place: LivePlace): ContainerModule {
  switch (place.backend) {
    case 'sqlite':
      return sqliteStorage({ path: place.file! });
    case 'postgres':
      return postgresStorage({ url: PG_TEST_URL, schema: place.schema!, poolSize: 3 });
    case 'redis':
      return redisStorage({ url: REDIS_TEST_URL, keyPrefix: place.prefix! });
    case 'tiered':
      return tieredStorage({ redis: { url: REDIS_TEST_URL, keyPrefix: place.prefix! }, postgres: { url: PG_TEST_URL, schema: place.schema!, poolSize: 3 } });
  }
}

/** A Waypoint on `place`, with a silent logger. */
export function openLive(place: LivePlace, options: Partial<WaypointOptions> & { pipelines?: (new () => object)[] } = {}): Promise<Waypoint> {
  return Waypoint.create({ modules: [liveStorage(place), new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent))], ...options });
}
