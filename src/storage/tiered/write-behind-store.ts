import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import { StoreUnavailableError, WaypointError, describeError, storeFailure } from '../../contract/errors';
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
  swapCount,
  type StoredStreamEvent,
  type StreamEvent,
} from '../../contract/checkpoint-store';
import { RedisCheckpointStore } from '../redis/redis-store';
import { JournalFlusher } from './journal-flusher';
import { resolveTieredOptions, type ResolvedTieredOptions, type TieredStorageOptions } from './options';
import { PgTier } from './pg-tier';
import { pgReplicaStatements, replicaLockKeys, type ReplicaStatements } from './replica-sql';
import { closeClient, createTierClient, ensureConnected, TierHealth, type TieredStats } from './tier-health';

import { HYDRATION_EPOCH_JUMP } from './tier-link';
import { TierReconciler } from './tier-reconciler';
import { WriteBehindStreams, hydrateRun } from './write-behind-streams';

export { HYDRATION_EPOCH_JUMP };

/**
 * Tiered store, write-behind (`tieredStorage({ mode: 'write-behind', ... })`): Redis takes every write
 * (the full Redis store: Lua scripts, leases and fencing on the Redis server) and PostgreSQL receives
 * them shortly after. Each write appends a change notice to a Redis Stream (the journal) in the same
 * MULTI as the change; a flusher (see `JournalFlusher`) reads the journal with XREADGROUP, applies it
 * to PostgreSQL in one transaction per batch and only then acknowledges it (XACK). A step therefore
 * costs one Redis round trip instead of a PostgreSQL commit.
 *
 * Loss window: a step is durable in Redis when the call returns and durable in PostgreSQL once its
 * journal entry is flushed, normally within `writeBehind.blockMs` plus one PostgreSQL transaction
 * (tens of milliseconds), and for as long as PostgreSQL is unreachable (the journal grows; runs go on).
 * What Redis has not persisted when it loses its data (a restart without AOF, a failover to a replica
 * that lagged) and was not yet flushed is lost: those runs come back from PostgreSQL as of their last
 * flushed change, and the steps after it run again, their side effects too (their operation records
 * were in the same lost writes; they run again with the same idempotency keys, which an external system
 * that honours them deduplicates). With Redis AOF `appendfsync always` nothing acknowledged is lost; with
 * `everysec`, up to a second. Also lost: changes to finished runs not flushed within
 * `redis.cacheTtlSeconds`, after which finished runs leave Redis, and anything Redis evicts: run it with
 * `maxmemory-policy noeviction` (or a `volatile-*` policy: only finished runs carry a TTL). Choose
 * write-through when a step must be in PostgreSQL before the next one starts.
 *
 * A Redis that comes back behind PostgreSQL (an older snapshot, a replica that lagged) never makes the two
 * tiers hold two histories: a load compares Redis's copy with PostgreSQL's (one small statement, read with
 * Redis's copy) and, when PostgreSQL's extends it, replaces Redis's copy by PostgreSQL's (epoch raised as
 * below), so the run resumes from PostgreSQL's last step; the flusher copies rows only when Redis's row
 * before them is PostgreSQL's. Two copies that neither extends are `TierDivergedError` (TIER_DIVERGED):
 * logged at error level, counted in `stats.divergences`, passed to `writeBehind.onDivergence`, refused by
 * loads, and never written to PostgreSQL; `adoptPostgresCopy(runId)` keeps PostgreSQL's history. (A load
 * while PostgreSQL does not answer within `redis.commandTimeoutMs` is served from Redis unchecked.)
 *
 * Reads come from Redis. A run Redis does not have (evicted, expired, lost, or from before write-behind)
 * is copied back from PostgreSQL on first use, with its lease epoch raised by {@link HYDRATION_EPOCH_JUMP}
 * (counted in `stats.cacheMisses`). While Redis is unreachable, calls fail with STORE_UNAVAILABLE: the
 * runs stop and resume once it is back. `deleteRun` removes the run from both tiers at once.
 *
 * @example
 * const waypoint = await Waypoint.create({
 *   modules: [tieredStorage({ mode: 'write-behind', redis: { url: 'redis://cache:6379' }, postgres: { url: pgUrl } })],
 * });
 * await (waypoint.store as WriteBehindCheckpointStore).drain(); // everything written so far is in PostgreSQL
 */
export class WriteBehindCheckpointStore extends CheckpointStore {
  readonly backend = 'tiered';
  readonly options: ResolvedTieredOptions;
  private readonly hot: RedisCheckpointStore;
  private readonly pg: PgTier;
  private readonly health: TierHealth;
  private readonly reader: Redis;
  private readonly flusher: JournalFlusher | null;
  /** Compares the two copies of a run at load time, on a connection of its own (used only when they disagree). */
  private readonly reconciler: TierReconciler;
  private readonly repairClient: Redis;
  private readonly repairConnecting: { current?: Promise<void> } = {};
  private readonly sql: ReplicaStatements;
  /** Serializes deletes and copies back into Redis with the flusher's batches (see `replicaLockKeys`). */
  private readonly applyLock: string;
  private readonly connecting: { current?: Promise<void> } = {};
  private readonly streams: WriteBehindStreams;

  constructor(options: TieredStorageOptions) {
    super();
    this.options = resolveTieredOptions({ ...options, mode: options.mode ?? 'write-behind' });
    if (this.options.mode !== 'write-behind')
      throw new WaypointError('INVALID_OPTIONS', `WriteBehindCheckpointStore is the write-behind store; for write-through use TieredCheckpointStore.`);
    const { redis, writeBehind } = this.options;
    this.health = new TierHealth(options.logger);
    this.pg = new PgTier(this.options.postgres);
    const stream = `${redis.keyPrefix}journal`;
    this.sql = pgReplicaStatements(this.pg.tables);
    this.applyLock = replicaLockKeys(stream, this.pg.tables.runs).apply;
    this.hot = new RedisCheckpointStore({
      url: redis.url,
      client: redis.client,
      keyPrefix: redis.keyPrefix,
      commandTimeoutMs: redis.commandTimeoutMs,
      finishedRunTtlSeconds: redis.cacheTtlSeconds,
      journal: stream,
    });
    this.streams = new WriteBehindStreams(this.hot, (runId) => this.ensureHot(runId));
    // The flusher blocks on its own connection; its reads may wait up to blockMs before they answer.
    const readTimeout = redis.commandTimeoutMs + writeBehind.blockMs;
    this.reader = redis.client ? redis.client.duplicate({ lazyConnect: true, enableOfflineQueue: false, commandTimeout: readTimeout }) : createTierClient(redis.url, readTimeout);
    const reconcile = { pg: this.pg, stream, keyPrefix: redis.keyPrefix, applyLock: this.applyLock, health: this.health, onDivergence: writeBehind.onDivergence };
    this.repairClient = redis.client ? redis.client.duplicate({ lazyConnect: true, enableOfflineQueue: false }) : createTierClient(redis.url, redis.commandTimeoutMs);
    this.reconciler = new TierReconciler({ ...reconcile, hot: this.hot, client: this.repairClient, connect: () => ensureConnected(this.repairClient, this.repairConnecting) });
    const flusherHot = new RedisCheckpointStore({ client: this.reader, keyPrefix: redis.keyPrefix });
    this.flusher = writeBehind.disableFlusher
      ? null
      : new JournalFlusher({
          hot: flusherHot,
          reader: this.reader,
          reconciler: new TierReconciler({ ...reconcile, hot: flusherHot, client: this.reader, connect: () => Promise.resolve() }),
          pg: this.pg,
          stream,
          group: 'waypoint-flushers',
          consumer: `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`,
          blockMs: writeBehind.blockMs,
          batchSize: writeBehind.batchSize,
          health: this.health,
        });
  }

  /** The Redis tier's: it holds the leases and takes every write first. */
  override get location(): string | undefined {
    return this.hot.location;
  }

  get stats(): TieredStats {
    return { ...this.health.stats };
  }

  useLogger(logger: Logger): void {
    this.health.useLogger(logger);
  }

  async init(): Promise<void> {
    await Promise.all([this.pg.store.init(), this.hot.init()]);
    if (this.flusher) {
      await this.call('init', undefined, () => ensureConnected(this.reader, this.connecting));
      this.flusher.start();
    }
  }

  /** Stops this process's flusher; unflushed entries stay in the journal for the next flusher. */
  async close(): Promise<void> {
    await this.flusher?.stop();
    await closeClient(this.reader);
    await closeClient(this.repairClient);
    await this.hot.close();
    await this.pg.store.close();
  }

  /** Journal entries not yet applied to PostgreSQL (what a Redis data loss would cost right now). */
  async backlog(): Promise<number> {
    return this.call('backlog', undefined, () => this.hotClientXlen());
  }

  /** Resolves once every change written so far is in PostgreSQL (some process must be flushing). */
  async drain(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await this.backlog()) > 0) {
      // plain Error: the cause clause of the typed STORE_UNAVAILABLE thrown here.
      if (Date.now() > deadline) throw new StoreUnavailableError('tiered', 'drain', new Error(`the journal still holds ${await this.backlog()} entries after ${timeoutMs} ms`));
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, this.options.writeBehind.blockMs)));
    }
  }

  async createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    const existing = await this.getRun(run.runId); // brings back a run only PostgreSQL still has
    return existing ? { run: existing, created: false } : this.hot.createRun(run);
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    return (await this.hot.getRun(runId)) ?? ((await this.hydrate(runId)) ? this.hot.getRun(runId) : null);
  }

  /**
   * Overrides the derived default: the hot tier's one-round-trip load (hydrating it first if needed),
   * checked against PostgreSQL's stamp of the run, read at the same time. When PostgreSQL's copy is
   * ahead of Redis's (Redis lost writes PostgreSQL had), Redis's copy is replaced by PostgreSQL's and that
   * is returned; when the two diverge, `TierDivergedError`. While PostgreSQL is unreachable, Redis's copy is
   * returned unchecked (the flusher checks the link again before it writes anything).
   */
  override async loadRun(runId: string): Promise<LoadedRun | null> {
    const [hot, truth] = await Promise.all([this.hot.loadRun(runId), this.postgresStamp(runId)]);
    if (!hot) return (await this.hydrate(runId)) ? this.hot.loadRun(runId) : null;
    return truth ? this.reconciler.checkLoad(hot, truth) : hot;
  }

  /**
   * Replaces Redis's copy of a run by PostgreSQL's (rows, operations, run row; the lease is freed and its
   * epoch raised past both copies', so any executor of the old copy is fenced out). The way out of a
   * `TierDivergedError` that keeps PostgreSQL's history: Redis's diverging steps, and their unflushed
   * changes, are dropped, and the next resume continues from PostgreSQL's last step. False when PostgreSQL
   * does not have the run (Redis's copy is then left as it is).
   *
   * @example
   * await store.adoptPostgresCopy('q3-aapl');
   * await waypoint.run(Analysis, { runId: 'q3-aapl' }); // resumes from PostgreSQL's last step
   */
  async adoptPostgresCopy(runId: string): Promise<boolean> {
    return this.call('adoptPostgresCopy', runId, () => this.reconciler.replace(runId));
  }

  /**
   * PostgreSQL's stamp of the run for the load's check; undefined while PostgreSQL cannot be asked, or
   * does not answer within `redis.commandTimeoutMs` (a hung PostgreSQL must not stop runs that Redis
   * serves: the flusher checks the link again before it writes anything).
   */
  private async postgresStamp(runId: string) {
    let timer: NodeJS.Timeout | undefined;
    const query = this.pg.stepLogStamp(runId).then(
      (truth) => truth ?? undefined,
      (error: unknown) => (
        this.health.log.warn('tiered write-behind: PostgreSQL unreachable at load; the run is loaded from Redis unchecked', { runId, error: describeError(error) }),
        undefined
      ),
    );
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => {
        this.health.log.warn('tiered write-behind: PostgreSQL did not answer at load; the run is loaded from Redis unchecked', {
          runId,
          waitedMs: this.options.redis.commandTimeoutMs,
        });
        resolve(undefined);
      }, this.options.redis.commandTimeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([query, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Redis's runs, plus the runs only PostgreSQL has (a run Redis has is judged by Redis's copy alone). */
  async listRuns(filter: RunFilter = {}): Promise<RunRecord[]> {
    const [hot, cold] = await Promise.all([this.hot.listRuns(filter), this.pg.store.listRuns(filter)]);
    const seen = new Set(hot.map((r) => r.runId));
    const candidates = cold.filter((r) => !seen.has(r.runId));
    const inRedis = await Promise.all(candidates.map((r) => this.hot.getRun(r.runId)));
    return [...hot, ...candidates.filter((_, i) => inRedis[i] === null)]
      .sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || a.runId.localeCompare(b.runId))
      .slice(0, filter.limit ?? Infinity);
  }

  async listSteps(runId: string, range?: { fromSequence?: number; toSequence?: number }): Promise<StepRecord[]> {
    return (await this.ensureHot(runId)) ? this.hot.listSteps(runId, range) : [];
  }

  appendStep(append: StepAppend): Promise<void> {
    return this.hot.appendStep(append);
  }

  /** Redis's batch append: one fenced script call and one journal notice for the rows ('async' durability). */
  override appendRun(appends: readonly StepAppend[]): Promise<void> {
    return this.hot.appendRun(appends);
  }

  async updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    if (fence === null && !(await this.ensureHot(runId))) return;
    await this.hot.updateRun(runId, patch, fence);
  }

  async acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    const grant = await this.hot.acquireLease(runId, owner, ttlMs, takeOverFrom);
    if (grant || (await this.hot.getRun(runId)) || !(await this.hydrate(runId))) return grant;
    return this.hot.acquireLease(runId, owner, ttlMs, takeOverFrom);
  }

  setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
    return this.hot.setLeaseExpiry(runId, owner, epoch, ttlMs);
  }

  async getOperation(operationKey: string): Promise<OperationRecord | null> {
    return (await this.hot.getOperation(operationKey)) ?? this.pg.store.getOperation(operationKey);
  }

  // Overrides the derived begin and finish: the hot tier's one Lua script each.
  override beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    return this.hot.beginOperation(op, fence);
  }

  override finishOperation(operationKey: string, outcome: OperationOutcome, fence: Fence & { runId: string }): Promise<void> {
    return this.hot.finishOperation(operationKey, outcome, fence);
  }

  async listOperations(runId: string): Promise<OperationRecord[]> {
    return (await this.ensureHot(runId)) ? this.hot.listOperations(runId) : [];
  }

  // A fenced write needs the run's lease, so the run is already hot; an unfenced one (a signal) may not be.
  async writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
    if (!('fence' in condition)) await this.ensureHot(record.runId);
    return this.hot.writeOperation(record, condition);
  }

  // Overrides the derived default: the hot tier's one Lua script.
  override async cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    return (await this.ensureHot(runId)) ? this.hot.cancelRun(runId, resumeHint) : null;
  }

  // A fenced change needs the run's lease, so the run is already hot; an unfenced one (retention) may not be.
  async replaceSteps(runId: string, change: StepsChange): Promise<void> {
    if (change.fence || (await this.ensureHot(runId))) await this.hot.replaceSteps(runId, change);
  }

  // Run streams: on the Redis tier only (write-behind-streams.ts).
  override appendEvents(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number> {
    return this.streams.appendEvents(runId, events, fence);
  }
  override readEvents(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
    return this.streams.readEvents(runId, from, limit);
  }
  override waitForEvents(runId: string, from: number, signal: AbortSignal): Promise<boolean> {
    return this.streams.waitForEvents(runId, from, signal);
  }
  override streamLength(runId: string): Promise<number> {
    return this.streams.streamLength(runId);
  }
  override dropStream(runId: string): Promise<number> {
    return this.streams.dropStream(runId);
  }

  /**
   * Deletes the run from both tiers at once, holding the lock the flusher holds for a batch: a batch
   * that read the run before cannot write it back after, and a failure in Redis undoes the PostgreSQL
   * delete. The journaled delete also reaches PostgreSQL through the flusher, in order.
   */
  async deleteRun(runId: string): Promise<void> {
    await this.pg.withLock('deleteRun', runId, this.applyLock, async (client) => {
      await client.query(this.sql.deleteRun, [runId]);
      await this.hot.deleteRun(runId);
    });
  }

  /**
   * Rewritten in Redis, the truth here, by one journaled script; PostgreSQL follows through the journal
   * like every other change: the notice names the rewritten step range and operations, and the flusher
   * copies those rows again even where PostgreSQL has them (it otherwise copies only the tail). Rewriting
   * PostgreSQL directly as well would race the flusher, and a failure between the two writes would leave
   * PostgreSQL with the old text while Redis, which every later read consults, says it is done; through the
   * journal, the change and its notice are applied together or not at all. A run only PostgreSQL has is
   * brought back into Redis first, as every other call on it does.
   */
  async rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    if (!(await this.ensureHot(runId))) return { rewritten: 0, skipped: swapCount(rewrite) };
    return this.hot.rewritePayloads(runId, rewrite);
  }

  private async ensureHot(runId: string): Promise<boolean> {
    return (await this.hot.getRun(runId)) !== null || this.hydrate(runId);
  }

  private hydrate(runId: string): Promise<boolean> {
    return hydrateRun({ pg: this.pg, hot: this.hot, sql: this.sql, applyLock: this.applyLock, health: this.health }, runId);
  }

  private hotClientXlen(): Promise<number> {
    return ensureConnected(this.reader, this.connecting).then(() => this.reader.xlen(`${this.options.redis.keyPrefix}journal`));
  }

  private async call<T>(operation: string, runId: string | undefined, work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      if (error instanceof WaypointError) throw error;
      throw storeFailure('redis', operation, error, runId);
    }
  }
}
