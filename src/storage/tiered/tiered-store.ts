import type { Redis } from 'ioredis';
import { WaypointError, reasonOf } from '../../contract/errors';
import type { Logger } from '../../contract/logger';
import {
  CheckpointStore,
  type Fence,
  type LeaseGrant,
  type LoadedRun,
  type NewOperation,
  type NewRun,
  type OperationOutcome,
  type OperationRecord,
  type OperationCondition,
  type OperationWrite,
  type PayloadRewrite,
  type RewriteOutcome,
  type RunFilter,
  type RunPatch,
  type RunRecord,
  type StepAppend,
  type StepRecord,
  type StepsChange,
  type StoreTransaction,
  type StoredStreamEvent,
  type StreamEvent,
} from '../../contract/checkpoint-store';
import { resolveTieredOptions, type ResolvedTieredOptions, type TieredStorageOptions } from './options';
import { PgTier } from './pg-tier';
import { StepCache, cachedSteps, type CacheScripts } from './step-cache';
import { closeClient, createTierClient, ensureConnected, TierHealth, type TieredStats } from './tier-health';

/**
 * A payload rewrite (re-encryption) reached PostgreSQL, but the run's Redis copy could not be dropped, so
 * loads may still return the old payloads from it until it expires. Code `TIER_COPY_NOT_DROPPED`.
 */
export class TierCopyNotDroppedError extends WaypointError {
  constructor(runId: string, key: string, cause: unknown) {
    const reason = reasonOf(cause);
    super(
      'TIER_COPY_NOT_DROPPED',
      `The payloads of run '${runId}' were rewritten in PostgreSQL, but its Redis copy '${key}' could not be dropped: ${reason}. ` +
        `Loads may return the old payloads from it until it expires (redis.cacheTtlSeconds): delete that key once Redis answers, and keep the old encryption key configured until then.`,
      { runId, cause },
    );
  }
}

/** Cache writes allowed in flight before a step waits for them (only reached when Redis is slow). */
const MAX_PENDING_CACHE_WRITES = 256;
/**
 * Copies of committed steps are sent to Redis together: at the latest this long after the first of
 * them committed, or at once when this many steps or bytes of output wait. One command per run then
 * carries them all, instead of one command (a socket write, a server wake-up, a reply) per step.
 */
const COPY_DELAY_MS = 10;
const COPY_MAX_STEPS = 64;
const COPY_MAX_BYTES = 1 << 20;

/**
 * Tiered checkpoint store, write-through (the default of `tieredStorage`): PostgreSQL is the durable
 * truth and Redis holds a copy of each run's step log, the bulk of a checkpoint load.
 *
 * - Writes: every contract write goes to PostgreSQL first, fenced there by the lease epoch atomically
 *   with the write (the SQL store's conditional statements). When it has committed, the call returns and
 *   the Redis copy is updated after it, never waited for, so a step costs one PostgreSQL commit. Copies
 *   of steps are gathered for up to 10 ms (or 64 steps) and sent as one command per run; any other
 *   write or read of the copy sends the gathered ones first, so the copy still sees the writes in commit
 *   order. A copy that is behind is a miss for a load in another process, never stale data.
 * - Leases are PostgreSQL's (the run row): the fence must live where the writes are checked, and a
 *   Redis lease would need every renewal mirrored to PostgreSQL to stay safe while Redis is down.
 * - Reads: `loadRun` (resume, `waypoint.checkpoint`) asks PostgreSQL for the run row and the first and
 *   last step ids (one small statement) while it reads the step rows from Redis; when the copy matches,
 *   Redis's rows are returned, else PostgreSQL's (and the copy is refilled). So a copy that missed a
 *   write is a miss, never stale data. Everything else reads PostgreSQL: run rows, listings, operations.
 * - Outages: a Redis error or timeout is a fallback to PostgreSQL, never an error for the run: it is
 *   counted in `stats.redisFallbacks` and logged (once when it starts, then every 30 s, and when Redis is
 *   back). A PostgreSQL outage fails the call with STORE_UNAVAILABLE, as the SQL store does: the run
 *   stops and resumes from its last committed step once PostgreSQL is back.
 *
 * Writes that bypass this store (another process using `postgresStorage` on the same tables) are safe:
 * loads detect the difference and read PostgreSQL.
 *
 * @example
 * const store = new TieredCheckpointStore({ redis: { url: 'redis://cache:6379' }, postgres: { url: process.env.DATABASE_URL!, schema: 'waypoint' } });
 * await store.init();
 * const waypoint = await Waypoint.create({ modules: [tieredStorage({ redis: { url }, postgres: { url: pgUrl } })] });
 * (waypoint.store as TieredCheckpointStore).stats.redisFallbacks; // 0 while Redis answers
 */
export class TieredCheckpointStore extends CheckpointStore {
  readonly backend = 'tiered';
  readonly options: ResolvedTieredOptions;
  private readonly pg: PgTier;
  private readonly cache: StepCache;
  private readonly client: Redis & CacheScripts;
  private readonly ownsClient: boolean;
  private readonly health: TierHealth;
  private readonly pending = new Set<Promise<void>>();
  /** Committed steps whose copy is not sent yet, per run, in commit order (see COPY_DELAY_MS). */
  private readonly unsent = new Map<string, StepRecord[]>();
  private unsentSteps = 0;
  private unsentBytes = 0;
  private copyTimer: NodeJS.Timeout | undefined;
  private readonly connecting: { current?: Promise<void> } = {};

  constructor(options: TieredStorageOptions) {
    super();
    this.options = resolveTieredOptions({ ...options, mode: options.mode ?? 'write-through' });
    if (this.options.mode !== 'write-through') {
      throw new WaypointError(
        'INVALID_OPTIONS',
        `TieredCheckpointStore is the write-through store; for mode 'write-behind' use tieredStorage({ mode: 'write-behind', ... }) or new WriteBehindCheckpointStore(...).`,
      );
    }
    const { redis } = this.options;
    this.health = new TierHealth(options.logger);
    this.pg = new PgTier(this.options.postgres);
    this.ownsClient = redis.client === undefined;
    this.client = StepCache.define(redis.client ?? createTierClient(redis.url, redis.commandTimeoutMs));
    this.cache = new StepCache(this.client, redis.keyPrefix, redis.cacheTtlSeconds);
  }

  /** The PostgreSQL tier's: it holds the truth and the leases. */
  override get location(): string | undefined {
    return this.pg.store.location;
  }

  /** Counters: Redis fallbacks, cache hits and misses (a snapshot). */
  get stats(): TieredStats {
    return { ...this.health.stats };
  }

  /** Sends the degraded-mode warnings to this logger (the DI module passes the container's). */
  useLogger(logger: Logger): void {
    this.health.useLogger(logger);
  }

  async init(): Promise<void> {
    await this.pg.store.init();
    // Redis being down at start is a degraded start, not a failure: PostgreSQL serves everything.
    await this.redis('init', undefined, () => ensureConnected(this.client, this.connecting));
  }

  /**
   * Resolves once the Redis copy reflects every write this store has made so far (or the attempt to
   * update it failed and was counted). `close()` waits for this too.
   */
  async settle(): Promise<void> {
    this.sendCopies();
    await Promise.allSettled([...this.pending]);
  }

  async close(): Promise<void> {
    await this.settle();
    if (this.ownsClient) await closeClient(this.client);
    await this.pg.store.close();
  }

  async createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    const result = await this.pg.store.createRun(run);
    // A new run starts an empty copy that its appends extend; an existing one is filled by its next load.
    if (result.created) this.sendCopies(); // an earlier run under this id may still have copies queued: they go first
    if (result.created) this.inBackground('createRun', run.runId, async () => void (await this.cache.fill(run.runId, 0, [])));
    return result;
  }

  getRun(runId: string): Promise<RunRecord | null> {
    return this.pg.store.getRun(runId);
  }

  // Overrides the derived default: served from the Redis copy when its stamp matches PostgreSQL.
  override async loadRun(runId: string): Promise<LoadedRun | null> {
    this.sendCopies(); // this process's own committed steps reach the copy before it is read
    // Both reads at once: the load costs about one small PostgreSQL statement when the copy is good.
    const copy = this.redis('loadRun', runId, () => this.cache.read(runId));
    let truth;
    try {
      truth = await this.pg.stepLogStamp(runId);
    } finally {
      await copy; // never rejects; awaited so a failed read is always accounted for
    }
    if (!truth) return null;
    const cached = await copy;
    const steps = cached ? cachedSteps(runId, truth.stamp, cached.hash) : null;
    if (steps) {
      this.health.stats.cacheHits += 1;
      return { run: truth.run, steps };
    }
    if (cached) this.health.stats.cacheMisses += 1;
    const loaded = await this.pg.store.loadRun(runId);
    // Refilled only while the generation read with the copy holds: a payload rewrite meanwhile wins.
    if (loaded && cached) this.inBackground('fill', runId, async () => void (await this.cache.fill(runId, loaded.run.lastSequence, loaded.steps, cached.generation)));
    return loaded;
  }

  listRuns(filter?: RunFilter): Promise<RunRecord[]> {
    return this.pg.store.listRuns(filter);
  }

  listSteps(runId: string, range?: { fromSequence?: number; toSequence?: number }): Promise<StepRecord[]> {
    return this.pg.store.listSteps(runId, range);
  }

  override async appendRun(appends: readonly StepAppend[]): Promise<void> {
    await this.pg.store.appendRun(appends);
    for (const append of appends) this.copyLater(append.step);
    if (this.pending.size >= MAX_PENDING_CACHE_WRITES) await Promise.race(this.pending);
  }

  async appendStep(append: StepAppend): Promise<void> {
    await this.pg.store.appendStep(append);
    this.copyLater(append.step);
    if (this.pending.size >= MAX_PENDING_CACHE_WRITES) await Promise.race(this.pending);
  }

  updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    return this.pg.store.updateRun(runId, patch, fence);
  }

  acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    return this.pg.store.acquireLease(runId, owner, ttlMs, takeOverFrom);
  }

  setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
    return this.pg.store.setLeaseExpiry(runId, owner, epoch, ttlMs);
  }

  getOperation(operationKey: string): Promise<OperationRecord | null> {
    return this.pg.store.getOperation(operationKey);
  }

  // Overrides the derived begin and finish: PostgreSQL's one round trip each.
  override beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    return this.pg.store.beginOperation(op, fence);
  }

  override finishOperation(operationKey: string, outcome: OperationOutcome, fence: Fence & { runId: string }): Promise<void> {
    return this.pg.store.finishOperation(operationKey, outcome, fence);
  }

  listOperations(runId: string): Promise<OperationRecord[]> {
    return this.pg.store.listOperations(runId);
  }

  writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
    return this.pg.store.writeOperation(record, condition);
  }

  // Overrides the derived default: PostgreSQL's one-statement cancel.
  override cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    return this.pg.store.cancelRun(runId, resumeHint);
  }

  async replaceSteps(runId: string, change: StepsChange): Promise<void> {
    await this.pg.store.replaceSteps(runId, change);
    this.sendCopies();
    this.inBackground('replaceSteps', runId, () => this.cache.replace(runId, change));
  }

  // Run streams live on the PostgreSQL tier only: their fence is the run row's epoch, which is there, and a
  // reader in another process is woken by its NOTIFY. Redis would only add a copy to keep in step.
  override appendEvents(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number> {
    return this.pg.store.appendEvents(runId, events, fence);
  }

  override readEvents(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
    return this.pg.store.readEvents(runId, from, limit);
  }

  override waitForEvents(runId: string, from: number, signal: AbortSignal): Promise<boolean> {
    return this.pg.store.waitForEvents(runId, from, signal);
  }

  override streamLength(runId: string): Promise<number> {
    return this.pg.store.streamLength(runId);
  }

  override dropStream(runId: string): Promise<number> {
    return this.pg.store.dropStream(runId);
  }

  async deleteRun(runId: string): Promise<void> {
    await this.pg.store.deleteRun(runId);
    this.sendCopies();
    this.inBackground('deleteRun', runId, () => this.cache.drop(runId));
  }

  /**
   * PostgreSQL (the truth) first; then the run's Redis copy is dropped, awaited. A load judges the copy
   * by the run row and its first and last checkpoint ids, which a payload rewritten in place leaves as
   * they were, so a copy still holding the old text would go on being served (see `StepCache.invalidate`
   * for the load racing this). If Redis cannot be reached for that, the call fails with
   * `TierCopyNotDroppedError` (PostgreSQL keeps the rewrite): unlike a missed append, nothing later would
   * notice the stale copy.
   */
  async rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    const outcome = await this.pg.store.rewritePayloads(runId, rewrite);
    if ((rewrite.steps ?? []).length === 0) return outcome; // the copy holds steps only
    try {
      this.sendCopies();
      await ensureConnected(this.client, this.connecting);
      await this.cache.invalidate(runId);
      this.health.ok();
    } catch (error) {
      this.health.failed('rewritePayloads', error, runId);
      throw new TierCopyNotDroppedError(runId, this.cache.key(runId), error);
    }
    return outcome;
  }

  /**
   * A step's transaction on PostgreSQL (transactional side effects), as the SQL store opens it. The
   * step it appends reaches the Redis copy once the transaction has committed.
   */
  override async beginTransaction(runId: string, fence: Fence): Promise<StoreTransaction> {
    const tx = await this.pg.store.beginTransaction(runId, fence);
    const appended: StepRecord[] = [];
    return {
      manager: tx.manager,
      exclusive: tx.exclusive,
      getOperation: (key) => tx.getOperation(key),
      recordOperation: (op, outcome) => tx.recordOperation(op, outcome),
      savepoint: () => tx.savepoint(),
      releaseSavepoint: () => tx.releaseSavepoint(),
      rollbackToSavepoint: () => tx.rollbackToSavepoint(),
      appendStep: async (append) => {
        await tx.appendStep(append);
        appended.push(append.step);
      },
      commit: async () => {
        await tx.commit();
        for (const step of appended.splice(0)) this.copyLater(step);
      },
      rollback: () => tx.rollback(),
    };
  }

  /** Queues the copy of a step PostgreSQL has committed; sent within COPY_DELAY_MS, or at once when enough wait. */
  private copyLater(step: StepRecord): void {
    let steps = this.unsent.get(step.runId);
    if (!steps) this.unsent.set(step.runId, (steps = []));
    steps.push(step);
    this.unsentSteps += 1;
    this.unsentBytes += step.output.length + (step.memory?.length ?? 0);
    if (this.unsentSteps >= COPY_MAX_STEPS || this.unsentBytes >= COPY_MAX_BYTES) this.sendCopies();
    else if (this.copyTimer === undefined) this.copyTimer = setTimeout(() => this.sendCopies(), COPY_DELAY_MS).unref();
  }

  /**
   * Sends every queued copy now, one command per run, ahead of whatever the caller sends next on the
   * same connection (so the copy applies the writes in commit order).
   */
  private sendCopies(): void {
    if (this.copyTimer !== undefined) clearTimeout(this.copyTimer);
    this.copyTimer = undefined;
    if (this.unsentSteps === 0) return;
    const runs = [...this.unsent];
    this.unsent.clear();
    this.unsentSteps = 0;
    this.unsentBytes = 0;
    for (const [runId, steps] of runs) this.inBackground('appendStep', runId, async () => void (await this.cache.appendMany(runId, steps)));
  }

  /**
   * Runs a Redis command; an error or timeout is counted and logged, and gives undefined (the caller
   * uses PostgreSQL). Never rejects.
   */
  private async redis<T>(operation: string, runId: string | undefined, work: () => Promise<T>): Promise<T | undefined> {
    try {
      await ensureConnected(this.client, this.connecting);
      const value = await work();
      this.health.ok();
      return value;
    } catch (error) {
      this.health.failed(operation, error, runId);
      return undefined;
    }
  }

  /**
   * Updates the copy after PostgreSQL committed, without holding up the caller. The command is sent
   * now (so copies of one run are updated in commit order on the one connection), tracked until it
   * settles, and awaited by `close()`; a failure only costs a later cache miss.
   */
  private inBackground(operation: string, runId: string, work: () => Promise<void>): void {
    const task: Promise<void> = this.redis(operation, runId, work).then(() => void this.pending.delete(task));
    this.pending.add(task);
  }
}
