import type { Redis } from 'ioredis';
import { ownRedisClient } from '../redis-client';
import { describeError } from '../../contract/errors';
import { JsonLogger, type Logger } from '../../contract/logger';

/** Counters of a tiered store, readable as `store.stats`. */
export interface TieredStats {
  /** Redis commands that failed or timed out (an outage): the read was served by PostgreSQL, or the cache write skipped. */
  redisFallbacks: number;
  /** Checkpoint loads whose step rows came from Redis (checked against PostgreSQL's run row). */
  cacheHits: number;
  /** Checkpoint loads that found no usable copy in Redis and read PostgreSQL (then refilled Redis). */
  cacheMisses: number;
  /** Write-behind: journal entries applied to PostgreSQL and acknowledged. */
  flushedEntries: number;
  /** Write-behind: flush batches that failed (retried; nothing is acknowledged before it commits). */
  flushFailures: number;
  /**
   * Write-behind: runs whose Redis copy was found behind PostgreSQL's (Redis lost writes PostgreSQL had) and
   * was replaced by PostgreSQL's (at a load), or dropped so that the next use brings PostgreSQL's back (by the flusher).
   */
  copiesReplaced: number;
  /**
   * Write-behind: detections of a run whose two copies hold different histories (`TIER_DIVERGED`); nothing of
   * such a run is written to PostgreSQL. Alert on any increase.
   */
  divergences: number;
}

const WARN_EVERY_MS = 30_000;

/**
 * Tracks whether Redis is answering, counts what fell back to PostgreSQL, and warns: once when an outage
 * starts, then at most every 30 s while it lasts (with the count), and once when Redis is back, so an
 * outage during a long run leaves a few log lines, not one per step.
 *
 * @example
 * const health = new TierHealth();
 * try { await cache.read(runId); health.ok(); } catch (error) { health.failed('read', error, runId); }
 */
export class TierHealth {
  readonly stats: TieredStats = { redisFallbacks: 0, cacheHits: 0, cacheMisses: 0, flushedEntries: 0, flushFailures: 0, copiesReplaced: 0, divergences: 0 };
  private logger: Logger;
  private degradedSince: number | null = null;
  private lastWarning = 0;

  constructor(logger?: Logger) {
    this.logger = logger ?? new JsonLogger();
  }

  /** The container's logger, once it is known (the store is built before the container resolves it). */
  useLogger(logger: Logger): void {
    this.logger = logger;
  }

  get log(): Logger {
    return this.logger;
  }

  /** A Redis command answered. */
  ok(): void {
    if (this.degradedSince === null) return;
    this.logger.warn('tiered store: Redis answers again; back to the fast path', { downForMs: Date.now() - this.degradedSince, redisFallbacks: this.stats.redisFallbacks });
    this.degradedSince = null;
  }

  /** A Redis command failed; PostgreSQL serves instead. Never throws. */
  failed(operation: string, error: unknown, runId?: string): void {
    this.stats.redisFallbacks += 1;
    const now = Date.now();
    if (this.degradedSince === null) this.degradedSince = now;
    else if (now - this.lastWarning < WARN_EVERY_MS) return;
    this.lastWarning = now;
    this.logger.warn('tiered store: Redis unavailable; falling back to PostgreSQL (runs continue, reads are slower)', {
      operation,
      runId,
      redisFallbacks: this.stats.redisFallbacks,
      error: describeError(error),
    });
  }
}

/**
 * The tiered store's own Redis client (made by the shared `ownRedisClient`): fails commands at once while
 * disconnected and after `commandTimeoutMs` when the server stops answering, so an outage turns into a
 * fallback quickly instead of a wait. ioredis keeps reconnecting in the background.
 */
export function createTierClient(url: string, commandTimeoutMs: number): Redis {
  return ownRedisClient(url, { maxRetriesPerRequest: 1, connectTimeoutMs: Math.max(1_000, commandTimeoutMs), commandTimeoutMs });
}

/** Connects a lazy client the first time (later, ioredis reconnects on its own). */
export async function ensureConnected(client: Redis, connecting: { current?: Promise<void> }): Promise<void> {
  if (client.status === 'wait' && connecting.current === undefined) {
    connecting.current = client.connect().finally(() => (connecting.current = undefined));
  }
  if (connecting.current) await connecting.current;
}

/** Quits a client the store created (disconnects at once when it is not connected). */
export async function closeClient(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
  else client.disconnect();
}
