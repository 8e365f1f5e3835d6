import type { Redis } from 'ioredis';
import { WaypointError, type TierDivergedError } from '../../contract/errors';
import type { Logger } from '../../contract/logger';
import { resolveOptions, type PostgresStoreOptions } from '../sql/options';

/** How the tiers share the writes; see {@link TieredStorageOptions.mode}. */
export type TieredMode = 'write-through' | 'write-behind';

/** The Redis tier. */
export interface TieredRedisOptions {
  /** Default 'redis://127.0.0.1:6379'. Ignored with `client`. */
  url?: string;
  /** Prefix of every key of this store (default 'waypoint:tier:'). Give each application its own. */
  keyPrefix?: string;
  /**
   * A Redis command with no reply after this long counts as an outage. Write-through: the read falls back
   * to PostgreSQL. Write-behind: the call fails with STORE_UNAVAILABLE. Default 1 000 ms.
   */
  commandTimeoutMs?: number;
  /**
   * Write-through: a cached step log expires this long after its last write or fill. Write-behind: a
   * finished run leaves Redis this long after it finished (PostgreSQL keeps it). Default 86 400 (a day).
   */
  cacheTtlSeconds?: number;
  /** Use this client instead of creating one (the store never quits it). Write-behind also opens a blocking duplicate. */
  client?: Redis;
}

/** The PostgreSQL tier: the same options as `postgresStorage`. */
export type TieredPostgresOptions = Omit<PostgresStoreOptions, 'type'>;

/** Write-behind flushing. */
export interface WriteBehindOptions {
  /** Longest wait for new journal entries before the flusher looks again. Default 50 ms. */
  blockMs?: number;
  /** Journal entries applied to PostgreSQL per transaction. Default 500. */
  batchSize?: number;
  /** Run no flusher in this process (another process flushes). Default false. */
  disableFlusher?: boolean;
  /**
   * Called (besides an error-level log line and `stats.divergences`) each time a run is found with two
   * different histories in Redis and PostgreSQL (`TierDivergedError`, code `TIER_DIVERGED`): page someone.
   * Nothing of that run is written to PostgreSQL until `adoptPostgresCopy(runId)` is called.
   */
  onDivergence?: (error: TierDivergedError) => void;
}

/**
 * Options of `tieredStorage(...)` / {@link TieredCheckpointStore}.
 *
 * @example
 * tieredStorage({ redis: { url: 'redis://cache:6379' }, postgres: { url: process.env.DATABASE_URL!, schema: 'waypoint' } });
 */
export interface TieredStorageOptions {
  redis?: TieredRedisOptions;
  postgres: TieredPostgresOptions;
  /**
   * 'write-through' (default): every write is committed in PostgreSQL before the call returns; Redis holds
   * a copy of each run's step log that makes loading a checkpoint cheap, and a Redis outage only costs
   * speed. 'write-behind': writes land in Redis and reach PostgreSQL shortly after, through a journal
   * stream; see `WriteBehindCheckpointStore` for its loss window before choosing it.
   */
  mode?: TieredMode;
  writeBehind?: WriteBehindOptions;
  /** Where degraded-mode warnings go. Default: the container's Logger binding, else a JSON logger on stderr. */
  logger?: Logger;
}

export interface ResolvedTieredOptions {
  mode: TieredMode;
  redis: { url: string; keyPrefix: string; commandTimeoutMs: number; cacheTtlSeconds: number; client: Redis | undefined };
  postgres: PostgresStoreOptions;
  writeBehind: Required<Omit<WriteBehindOptions, 'onDivergence'>> & Pick<WriteBehindOptions, 'onDivergence'>;
}

export const DEFAULT_TIER_PREFIX = 'waypoint:tier:';

/** Fills defaults and rejects bad values when the module is configured, not at the first write. */
export function resolveTieredOptions(options: TieredStorageOptions): ResolvedTieredOptions {
  if (!options || typeof options !== 'object' || !options.postgres) throw invalid('postgres (the durable tier) is required: { postgres: { url } }');
  const mode = options.mode ?? 'write-through';
  if (mode !== 'write-through' && mode !== 'write-behind') throw invalid(`mode '${String(mode)}' (use 'write-through' or 'write-behind')`);
  const postgres: PostgresStoreOptions = { type: 'postgres', ...options.postgres };
  resolveOptions(postgres); // the SQL store's own checks: url, schema, prefix
  const redis = options.redis ?? {};
  const commandTimeoutMs = positive('redis.commandTimeoutMs', redis.commandTimeoutMs ?? 1_000);
  const cacheTtlSeconds = redis.cacheTtlSeconds ?? 86_400;
  if (!Number.isInteger(cacheTtlSeconds) || cacheTtlSeconds < 1) throw invalid(`redis.cacheTtlSeconds ${cacheTtlSeconds} (a whole number of seconds >= 1)`);
  const wb = options.writeBehind ?? {};
  if (wb.onDivergence !== undefined && typeof wb.onDivergence !== 'function') throw invalid('writeBehind.onDivergence (a function, called with each TierDivergedError)');
  return {
    mode,
    redis: {
      url: redis.url ?? 'redis://127.0.0.1:6379',
      keyPrefix: redis.keyPrefix ?? DEFAULT_TIER_PREFIX,
      commandTimeoutMs,
      cacheTtlSeconds,
      client: redis.client,
    },
    postgres,
    writeBehind: {
      blockMs: positive('writeBehind.blockMs', wb.blockMs ?? 50),
      batchSize: positive('writeBehind.batchSize', wb.batchSize ?? 500),
      disableFlusher: wb.disableFlusher ?? false,
      onDivergence: wb.onDivergence,
    },
  };
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw invalid(`${name} ${value} (a positive number)`);
  return value;
}

function invalid(what: string): WaypointError {
  return new WaypointError('INVALID_OPTIONS', `tieredStorage: invalid option ${what}.`);
}
