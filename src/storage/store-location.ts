import type { Redis } from 'ioredis';

/**
 * Store locations: one string per database a store writes to, equal for two store objects opened on
 * the same data (see `CheckpointStore.location`). Pure functions of the store's options; a location that
 * cannot be worked out is undefined, and the runtime then keys its in-process guard by the store object.
 *
 * @example
 * sqliteLocation('/var/lib/app/waypoint.db', 'waypoint_');                    // 'sqlite:/var/lib/app/waypoint.db#waypoint_'
 * postgresLocation('postgres://app@db:5432/prod', 'waypoint', 'waypoint_');  // 'postgres://db:5432/prod?schema=waypoint#waypoint_'
 */
export function sqliteLocation(absolutePath: string, tablePrefix: string): string {
  return `sqlite:${absolutePath}#${tablePrefix}`;
}

/**
 * Host, port, database and schema of a PostgreSQL URL. Without a schema the tables live in the first
 * schema of the role's search_path (`"$user", public` by default), so the role is part of the location.
 */
export function postgresLocation(url: string, schema: string | undefined, tablePrefix: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  const host = parsed.searchParams.get('host') ?? parsed.hostname;
  const port = parsed.port || parsed.searchParams.get('port') || '5432';
  const user = decodeURIComponent(parsed.username);
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, '')) || user;
  const where = schema === undefined ? `search_path_of=${user}` : `schema=${schema}`;
  return `postgres://${host}:${port}/${database}?${where}#${tablePrefix}`;
}

/** Host and port (or socket path) and database number of an ioredis client, with the store's key prefix. */
export function redisLocation(client: Pick<Redis, 'options'>, keyPrefix: string): string {
  const { host, port, path, db } = client.options;
  const server = path ? `unix:${path}` : `${host ?? '127.0.0.1'}:${port ?? 6379}`;
  return `redis://${server}/${db ?? 0}#${keyPrefix}`;
}
