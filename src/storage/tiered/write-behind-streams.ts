import type { Fence, StoredStreamEvent, StreamEvent } from '../../contract/checkpoint-store';
import type { RedisCheckpointStore } from '../redis/redis-store';
import type { PgTier } from './pg-tier';
import type { ReplicaStatements } from './replica-sql';
import type { TierHealth } from './tier-health';
import { HYDRATION_EPOCH_JUMP } from './tier-link';

/** What `hydrateRun` works with: the write-behind store's tiers, statements, lock and health. */
export interface HydrationParts {
  pg: PgTier;
  hot: RedisCheckpointStore;
  sql: ReplicaStatements;
  applyLock: string;
  health: TierHealth;
}

/**
 * Copies a run PostgreSQL has into Redis (unless it got there meanwhile); false when neither has it.
 * The copy is written under the flusher's lock, after checking the run was not deleted since it was read.
 * (The write-behind store's `ensureHot`, which its stream methods below rely on for unfenced calls.)
 *
 * @example
 * if (!(await hydrateRun(parts, 'q3-aapl'))) throw new RunNotFoundError('q3-aapl');
 */
export async function hydrateRun(parts: HydrationParts, runId: string): Promise<boolean> {
  const { pg, hot, sql, applyLock, health } = parts;
  const loaded = await pg.store.loadRun(runId);
  if (!loaded) return false;
  const operations = await pg.store.listOperations(runId);
  return pg.withLock('hydrate', runId, applyLock, async (client) => {
    if ((await client.query(sql.runExists, [runId])).rowCount === 0) return false;
    if (await hot.importRun(loaded, operations, HYDRATION_EPOCH_JUMP)) {
      health.stats.cacheMisses += 1;
      health.log.info('tiered write-behind: run brought back into Redis from PostgreSQL', { runId, lastSequence: loaded.run.lastSequence });
    }
    return true;
  });
}

/**
 * The run-stream methods of the write-behind tiered store (issue 37). A run's stream lives on the Redis
 * tier only, like the fence it is checked against, and is not flushed to PostgreSQL: reads, waits and
 * drops go to Redis. An unfenced call (a cancel's status, retention's drop) may find the run only in
 * PostgreSQL (evicted from Redis): it is brought back first (`ensureHot`), as every other call on it is.
 */
export class WriteBehindStreams {
  constructor(
    private readonly hot: RedisCheckpointStore,
    /** Brings a run PostgreSQL has back into Redis; false when neither tier has it. */
    private readonly ensureHot: (runId: string) => Promise<boolean>,
  ) {}

  async appendEvents(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number> {
    if (!fence) await this.ensureHot(runId);
    return this.hot.appendEvents(runId, events, fence);
  }

  readEvents(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
    return this.hot.readEvents(runId, from, limit);
  }

  waitForEvents(runId: string, from: number, signal: AbortSignal): Promise<boolean> {
    return this.hot.waitForEvents(runId, from, signal);
  }

  streamLength(runId: string): Promise<number> {
    return this.hot.streamLength(runId);
  }

  /**
   * Deletes the run's stream (the run stays), returning how many events it held. The stream is in Redis
   * only, so there is nothing to journal: a run only PostgreSQL has kept no stream when it was evicted.
   */
  dropStream(runId: string): Promise<number> {
    return this.hot.dropStream(runId);
  }
}
