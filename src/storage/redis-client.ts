import type { Redis } from 'ioredis';
import { ioredis } from './drivers';

/** Where Waypoint's own Redis clients connect when no URL is given. */
export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** How a Redis client Waypoint creates for itself behaves; the rest is the same for every one of them. */
export interface OwnRedisClientOptions {
  /** A command the server does not answer within this time fails. */
  commandTimeoutMs: number;
  /**
   * How often ioredis resends a command after a reconnect. 0 where a lost reply must never be replayed
   * (the Redis store's fenced appends: a replay would read as a sequence conflict).
   */
  maxRetriesPerRequest: number;
  /** Default 2000 ms. */
  connectTimeoutMs?: number;
}

/**
 * The one factory of the Redis clients Waypoint owns (the Redis store, the tiered stores, the LangGraph
 * saver on Redis; a client the user passes is used as given). Such a client connects lazily, fails
 * commands at once while disconnected instead of queueing them (an outage must surface as an error, never
 * as a write that hangs), and swallows the 'error' event ioredis emits on every failed reconnect (unhandled
 * it would crash the process): each command's own rejection carries the failure to its caller.
 *
 * @example
 * const client = ownRedisClient(options.url ?? DEFAULT_REDIS_URL, { commandTimeoutMs: 10_000, maxRetriesPerRequest: 0 });
 */
export function ownRedisClient(url: string, options: OwnRedisClientOptions): Redis {
  const client = new (ioredis().Redis)(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: options.maxRetriesPerRequest,
    connectTimeout: options.connectTimeoutMs ?? 2_000,
    commandTimeout: options.commandTimeoutMs,
  });
  client.on('error', () => {});
  return client;
}
