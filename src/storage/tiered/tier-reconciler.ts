import type { Redis } from 'ioredis';
import type { PoolClient } from 'pg';
import { StoreUnavailableError, TierDivergedError } from '../../contract/errors';
import type { LoadedRun, RunRecord } from '../../contract/checkpoint-store';
import { journalFields } from '../redis/journal';
import type { RedisCheckpointStore } from '../redis/redis-store';
import type { PgTier } from './pg-tier';
import type { StepLogStamp } from './step-cache';
import { CopyDropper, HYDRATION_EPOCH_JUMP, comparePoint, judgeCopies, pendingReshape, type RowId, type TierVerdict } from './tier-link';
import type { TierHealth } from './tier-health';

export interface ReconcilerDeps {
  /** The Redis store to read and import runs through. */
  hot: RedisCheckpointStore;
  /** A connection for the journal scan, the drop script and re-journaling (connected by `connect`). */
  client: Redis;
  connect: () => Promise<void>;
  pg: PgTier;
  stream: string;
  keyPrefix: string;
  /** The advisory lock that serializes moves between the tiers (see `replicaLockKeys`). */
  applyLock: string;
  health: TierHealth;
  onDivergence?: (error: TierDivergedError) => void;
}

/** What the flusher does with a run whose link check failed. */
export type FlushOutcome = 'deferred' | 'resync' | 'dropped' | 'diverged';

/** Alerts for one diverged run are logged the first time and then every this many detections. */
const REPORT_EVERY = 100;
/** Fresh judgments a load makes while the run keeps changing under it. */
const LOAD_ATTEMPTS = 3;

/**
 * Keeps write-behind's two copies of a run from growing two histories. A load compares Redis's copy
 * with PostgreSQL's; when PostgreSQL's extends Redis's (Redis came back from an older snapshot, a
 * lagging replica, the last second of `appendfsync everysec`), Redis's copy is replaced by
 * PostgreSQL's, with the lease epoch raised past both, so the run resumes from PostgreSQL's last step
 * and every executor of the older copy is fenced out. When neither extends the other, it is a
 * `TierDivergedError`, counted in `stats.divergences`, logged at error level and passed to
 * `writeBehind.onDivergence`; PostgreSQL is never written for that run until an operator chooses
 * (`adoptPostgresCopy`). The flusher asks the same questions when its per-batch link check fails; when
 * PostgreSQL is ahead it drops Redis's copy, and the next use brings PostgreSQL's back (`hydrate`).
 *
 * PostgreSQL is read before the apply lock is taken, or on the session that holds it: a read from the pool
 * under the lock could wait for a connection held by someone waiting for that lock.
 *
 * @example
 * const reconciler = new TierReconciler({ hot, client, connect, pg, stream, keyPrefix, applyLock, health });
 * const loaded = await reconciler.checkLoad((await hot.loadRun(runId))!, (await pg.stepLogStamp(runId))!);
 */
export class TierReconciler {
  private readonly dropper: CopyDropper;
  private readonly reported = new Map<string, number>();

  constructor(private readonly deps: ReconcilerDeps) {
    this.dropper = new CopyDropper(deps.client, deps.keyPrefix);
  }

  /**
   * The copy a load returns: Redis's when it extends PostgreSQL's (checked against PostgreSQL's stamp,
   * read with it: no extra round trip then), else PostgreSQL's once it has replaced Redis's. Also
   * replaced when both hold the same rows but PostgreSQL saw a later lease epoch: Redis lost a lease
   * grant whose holder may still be running, and would hand its epoch out again. Throws
   * `TierDivergedError` when neither copy extends the other.
   */
  async checkLoad(hot: LoadedRun, truth: { run: RunRecord; stamp: StepLogStamp }): Promise<LoadedRun> {
    if (truth.run.leaseEpoch <= hot.run.leaseEpoch && redisExtends(hot, truth.stamp)) return hot;
    const runId = hot.run.runId;
    for (let attempt = 0; attempt < LOAD_ATTEMPTS; attempt++) {
      await this.deps.connect();
      // A truncation, fold or rewrite the flusher has not applied yet explains the difference: Redis is right.
      if (await pendingReshape(this.deps.client, this.deps.stream, runId)) return (await this.deps.hot.loadRun(runId)) ?? hot;
      const judged = await this.judge(runId);
      if (!judged) return (await this.deps.hot.loadRun(runId)) ?? hot;
      const epochLost = judged.postgresEpoch > judged.redis.run.leaseEpoch && judged.postgresLast === judged.redis.run.lastSequence;
      if (judged.verdict.kind === 'redis-ahead' && !epochLost) return judged.redis;
      if (judged.verdict.kind === 'diverged') throw this.diverged(runId, judged.verdict.sequence, judged.redis.run.lastSequence, judged.postgresLast);
      const replaced = await this.replace(runId, judged.redis.run.lastSequence);
      const loaded = replaced ? await this.deps.hot.loadRun(runId) : null;
      if (loaded) return loaded;
    }
    // plain Error: the cause clause of the typed STORE_UNAVAILABLE thrown here.
    throw new StoreUnavailableError('tiered', 'loadRun', new Error('the run kept changing while its Redis and PostgreSQL copies were compared; try again'), runId);
  }

  /**
   * The flusher's question, asked inside its batch's transaction (`client` holds the apply lock, so
   * nothing else moves the run between the tiers meanwhile) after Redis's row before what it would copy
   * did not match PostgreSQL's. `afterId`: the last journal entry of the batch.
   */
  async settleForFlush(runId: string, afterId: string, client: PoolClient): Promise<FlushOutcome> {
    // The batch this run was left out of is acknowledged whole, with the operations its entries named: the entry
    // that copies the run later names them all (`a`), or a committed side effect's record would never reach PostgreSQL.
    const again = () => this.deps.client.xadd(this.deps.stream, '*', ...journalFields({ r: runId, k: 'u', a: 1 }));
    if (await pendingReshape(this.deps.client, this.deps.stream, runId, afterId)) {
      await again(); // after the batch that reshapes the run
      return 'deferred';
    }
    const judged = await this.judge(runId, client);
    if (judged?.verdict.kind === 'diverged') {
      this.diverged(runId, judged.verdict.sequence, judged.redis.run.lastSequence, judged.postgresLast);
      return 'diverged';
    }
    if (judged?.verdict.kind === 'postgres-ahead' && (await this.dropper.drop(runId, judged.redis.run.lastSequence)) === 'DROPPED') {
      this.replaced(runId, judged.redis.run.lastSequence, judged.postgresLast, 'dropped; the next use brings the run back from PostgreSQL');
      return 'dropped';
    }
    // The copies agree now (a change landed between the batch's reads): a fresh entry copies the run in a later batch.
    if (judged) await again();
    return 'resync';
  }

  /**
   * Replaces Redis's copy of a run by PostgreSQL's; with `expectedLast`, only if Redis's copy still ends
   * there. False when PostgreSQL does not have the run, or either copy moved meanwhile.
   */
  async replace(runId: string, expectedLast?: number): Promise<boolean> {
    const { pg, hot } = this.deps;
    const loaded = await pg.store.loadRun(runId);
    if (!loaded) return false;
    const operations = await pg.store.listOperations(runId);
    return pg.withLock('adoptPostgresCopy', runId, this.deps.applyLock, async (client) => {
      const now = await pg.stepLogStamp(runId, client);
      if (!now || (now.stamp.last?.checkpointId ?? null) !== (loaded.steps.at(-1)?.checkpointId ?? null)) return false; // PostgreSQL moved since it was read
      const current = await hot.getRun(runId);
      await this.deps.connect();
      if ((await this.dropper.drop(runId, expectedLast)) === 'CHANGED') return false;
      // Past both epochs: an executor holding either copy's lease is fenced out.
      const leaseEpoch = Math.max(loaded.run.leaseEpoch, current?.leaseEpoch ?? 0);
      await hot.importRun({ run: { ...loaded.run, leaseEpoch }, steps: loaded.steps }, operations, HYDRATION_EPOCH_JUMP);
      this.replaced(runId, current?.lastSequence ?? null, loaded.run.lastSequence, 'replaced by it');
      return true;
    });
  }

  private replaced(runId: string, redisLast: number | null, postgresLast: number, how: string): void {
    this.deps.health.stats.copiesReplaced += 1;
    this.reported.delete(runId);
    this.deps.health.log.warn(`tiered write-behind: Redis's copy of the run was behind PostgreSQL's and was ${how}; the run resumes from PostgreSQL's last step`, {
      runId,
      redisLastSequence: redisLast,
      postgresLastSequence: postgresLast,
    });
  }

  /** Fresh reads of both copies (PostgreSQL first: whatever it has, Redis had before) and the verdict. */
  private async judge(runId: string, client?: PoolClient): Promise<{ verdict: TierVerdict; redis: LoadedRun; postgresLast: number; postgresEpoch: number } | null> {
    const truth = await this.deps.pg.stepLogStamp(runId, client);
    const redis = await this.deps.hot.loadRun(runId);
    if (!redis) return null; // gone from Redis: the next use brings it back from PostgreSQL
    if (!truth) return { verdict: { kind: 'redis-ahead' }, redis, postgresLast: 0, postgresEpoch: 0 };
    const postgresLast = truth.stamp.last?.sequence ?? 0;
    const at = comparePoint(redis.run.lastSequence, postgresLast);
    let postgresRow: RowId | null = truth.stamp.last;
    if (at !== postgresLast && at > 0) postgresRow = await this.deps.pg.checkpointAt(runId, at, client);
    const verdict = judgeCopies(
      { lastSequence: redis.run.lastSequence, firstSequence: redis.steps[0]?.sequence ?? null, row: redis.steps.find((s) => s.sequence === at) ?? null },
      { lastSequence: postgresLast, firstSequence: truth.stamp.first?.sequence ?? null, row: postgresRow },
    );
    return { verdict, redis, postgresLast, postgresEpoch: truth.run.leaseEpoch };
  }

  /** Counts, logs (at error level, not once per batch) and reports a divergence; returns the error. */
  private diverged(runId: string, sequence: number, redisLast: number, postgresLast: number): TierDivergedError {
    const error = new TierDivergedError(runId, sequence, redisLast, postgresLast);
    const { health, onDivergence } = this.deps;
    health.stats.divergences += 1;
    const seen = (this.reported.get(runId) ?? 0) + 1;
    this.reported.set(runId, seen);
    if (seen === 1 || seen % REPORT_EVERY === 0) {
      health.log.error(error.message, { code: error.code, runId, sequence, redisLastSequence: redisLast, postgresLastSequence: postgresLast, detections: seen });
    }
    try {
      onDivergence?.(error);
    } catch (listenerError) {
      health.log.warn('tiered write-behind: the onDivergence listener threw', { runId, error: String(listenerError) });
    }
    return error;
  }
}

/**
 * The load's fast path: Redis's copy extends PostgreSQL's stamp (same row at PostgreSQL's last sequence,
 * or Redis folded its rows past it). Anything else is judged again from fresh reads.
 */
function redisExtends(hot: LoadedRun, truth: StepLogStamp): boolean {
  const last = truth.last;
  if (!last) return true; // PostgreSQL has no rows of the run yet
  if (last.sequence > hot.run.lastSequence) return false;
  const first = hot.steps[0];
  if (!first) return false;
  if (first.sequence > last.sequence) return true;
  return hot.steps[last.sequence - first.sequence]?.checkpointId === last.checkpointId;
}
