import type { Redis } from 'ioredis';
import { DEFAULT_REDIS_URL, ownRedisClient } from '../redis-client';
import { WaypointError, storeFailure } from '../../contract/errors';
import {
  CheckpointStore,
  type Fence,
  type LeaseGrant,
  type LoadedRun,
  type NewOperation,
  type NewRun,
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
  type StoredStreamEvent,
  type StreamEvent,
} from '../../contract/checkpoint-store';
import { toRunRecord } from './codec';
import { redisStoreContext, type RedisStoreContext } from './context';
import { DEFAULT_KEY_PREFIX, redisKeys, type RedisKeys } from './keys';
import * as leases from './leases';
import { listRunsFromIndexes } from './list-runs';
import * as maintenance from './maintenance';
import * as ops from './operations';
import { defineReplicaScripts, importRun, readTail, type ReplicaScripts } from './replica';
import * as runs from './runs';
import * as streams from './streams';
import { defineScripts, type ScriptCommands } from './scripts';
import { redisLocation } from '../store-location';

/** Options of the Redis checkpoint store; see {@link RedisCheckpointStore}. */
export interface RedisStoreOptions {
  /** Connection URL of the store's own client. Default 'redis://127.0.0.1:6379'. Ignored with `client`. */
  url?: string;
  /** Prefix of every key (default 'waypoint:'). Give each application or test its own. */
  keyPrefix?: string;
  /** When set, a run's keys expire this long after it reaches completed / failed / cancelled. Default: kept. */
  finishedRunTtlSeconds?: number;
  /**
   * Own client only: a command with no reply after this long fails (STORE_UNAVAILABLE), so a server that
   * stops answering without closing the connection cannot hang a checkpoint write. Default 10 000 ms.
   */
  commandTimeoutMs?: number;
  /** Use this client instead of creating one. The store never quits a client it did not create. */
  client?: Redis;
  /**
   * Also append a change notice (see `JournalEntry`) to this stream key for every accepted write, in
   * the same MULTI as the write, for a replica to follow (the tiered store's write-behind mode does).
   * Lease renewals are not journaled: they only move the expiry, which a replica does not need.
   */
  journal?: string;
}

const MIN_SERVER_VERSION = [6, 2]; // ZRANGE ... BYSCORE REV LIMIT (listing) arrived in 6.2

/**
 * Checkpoint store on Redis: a run is a hash, its steps one hash entry each (appending never rewrites the
 * run), its operations hashes, and listing reads sorted-set indexes (never KEYS / SCAN). Every fenced
 * or atomic write is a Lua script that checks the lease epoch and the sequence and writes in one step;
 * lease expiry is judged by the Redis server's clock, not the workers'. Key layout: see {@link redisKeys}.
 *
 * Durability depends on the server's persistence, not on this store. Redis without AOF (`--save ""
 * --appendonly no`) loses every run on restart; with RDB snapshots it loses what changed since the last
 * snapshot; with `appendonly yes` and `appendfsync always` each acknowledged write is on disk (with the
 * default `everysec`, up to a second of writes can be lost). For Waypoint's "no progress lost" guarantee
 * either configure AOF with `appendfsync always` or use tiered storage (`tieredStorage(...)`, a SQL tier
 * behind Redis).
 *
 * Targets a standalone Redis (>= 6.2). Scripts also touch the shared index keys, so on a Redis Cluster
 * give the prefix a hash tag (e.g. 'waypoint:{wp}:') to keep every key in one slot.
 *
 * Errors: an unreachable or failing server raises `StoreUnavailableError` (code STORE_UNAVAILABLE; an
 * error reply to the command itself is STORE_REJECTED)
 * promptly; the store's own client does not queue commands while disconnected, retries a command at
 * most twice across reconnects, and gives up on an unanswered one after `commandTimeoutMs`. A rejected
 * fenced write raises `LeaseLostError`.
 *
 * @example
 * const store = new RedisCheckpointStore({ url: 'redis://127.0.0.1:6379', finishedRunTtlSeconds: 7 * 86_400 });
 * await store.init();
 * const waypoint = await Waypoint.create({ modules: [redisStorage({ url: process.env.REDIS_URL })] });
 */
export class RedisCheckpointStore extends CheckpointStore {
  readonly backend = 'redis';
  private readonly keys: RedisKeys;
  private readonly client: Redis & ScriptCommands & ReplicaScripts;
  private readonly ownsClient: boolean;
  private readonly ttlSeconds: number;
  // What the operations in runs.ts, leases.ts, operations.ts and maintenance.ts work with.
  private readonly ctx: RedisStoreContext;
  private connecting: Promise<void> | undefined;
  private readonly where: string;

  constructor(options: RedisStoreOptions = {}) {
    super();
    this.keys = redisKeys(options.keyPrefix ?? DEFAULT_KEY_PREFIX);
    const ttl = options.finishedRunTtlSeconds;
    if (ttl !== undefined && !(Number.isInteger(ttl) && ttl >= 1)) {
      // Redis expires keys in whole seconds; 0 or a fraction would silently mean "delete at once".
      throw new WaypointError('INVALID_OPTIONS', `redisStorage: finishedRunTtlSeconds must be a whole number of seconds >= 1 (got ${ttl}); omit it to keep finished runs.`);
    }
    this.ttlSeconds = ttl ?? 0;
    this.ownsClient = options.client === undefined;
    const client =
      options.client ??
      // No resend after a reconnect: a fenced append whose reply was lost would come back as a sequence
      // conflict (a spurious LEASE_LOST). Failing with STORE_UNAVAILABLE leaves the outcome to the resume,
      // which finds the step recorded or not.
      ownRedisClient(options.url ?? DEFAULT_REDIS_URL, { maxRetriesPerRequest: 0, commandTimeoutMs: options.commandTimeoutMs ?? 10_000 });
    this.client = defineScripts(defineReplicaScripts(client));
    this.ctx = redisStoreContext(this.client, this.keys, this.ttlSeconds, options.journal);
    this.where = redisLocation(client, options.keyPrefix ?? DEFAULT_KEY_PREFIX);
  }

  override get location(): string {
    return this.where;
  }

  async init(): Promise<void> {
    await this.call('init', undefined, async () => {
      const info = await this.client.info('server');
      const version = /redis_version:(\d+)\.(\d+)/.exec(info);
      const [major, minor] = version ? [Number(version[1]), Number(version[2])] : [0, 0];
      if (major < MIN_SERVER_VERSION[0] || (major === MIN_SERVER_VERSION[0] && minor < MIN_SERVER_VERSION[1])) {
        // plain Error: the clause this.call() wraps as the cause of STORE_UNAVAILABLE (init), the code a failed init has always had.
        throw new Error(`Redis ${major}.${minor} is too old; the Redis store needs ${MIN_SERVER_VERSION.join('.')} or later`);
      }
    });
  }

  async close(): Promise<void> {
    if (!this.ownsClient || this.client.status === 'end') return;
    if (this.client.status === 'ready') await this.client.quit().catch(() => this.client.disconnect());
    else this.client.disconnect();
  }

  async createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    return this.call('createRun', run.runId, () => runs.createRun(this.ctx, run));
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    return this.call('getRun', runId, async () => toRunRecord(await this.client.hgetall(this.keys.run(runId))));
  }

  // Overrides the derived default: one MULTI, one round trip, one snapshot.
  override async loadRun(runId: string): Promise<LoadedRun | null> {
    return this.call('loadRun', runId, () => runs.loadRun(this.ctx, runId));
  }

  async listRuns(filter: RunFilter = {}): Promise<RunRecord[]> {
    return this.call('listRuns', undefined, () => listRunsFromIndexes(this.client, this.keys, filter));
  }

  async listSteps(runId: string, range: { fromSequence?: number; toSequence?: number } = {}): Promise<StepRecord[]> {
    return this.call('listSteps', runId, () => runs.listSteps(this.ctx, runId, range));
  }

  async appendStep(input: StepAppend): Promise<void> {
    await this.call('appendStep', input.step.runId, () => runs.appendStep(this.ctx, input));
  }

  /** Overrides the derived one-by-one default: the rows in one script call, all or none (see runs.ts). */
  override async appendRun(appends: readonly StepAppend[]): Promise<void> {
    if (appends.length === 0) return;
    if (appends.length === 1) return this.appendStep(appends[0]);
    await this.call('appendRun', appends[0].step.runId, () => runs.appendRun(this.ctx, appends));
  }

  async updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    await this.call('updateRun', runId, () => runs.updateRun(this.ctx, runId, patch, fence));
  }

  async acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    return this.call('acquireLease', runId, () => leases.acquireLease(this.ctx, runId, owner, ttlMs, takeOverFrom));
  }

  setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
    return this.call('setLeaseExpiry', runId, () => leases.setLeaseExpiry(this.ctx, runId, owner, epoch, ttlMs));
  }

  async getOperation(operationKey: string): Promise<OperationRecord | null> {
    return this.call('getOperation', undefined, () => ops.getOperation(this.ctx, operationKey));
  }

  // Overrides the derived begin and finish: one Lua script each, around every side effect.
  override async beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    return this.call('beginOperation', op.runId, () => ops.beginOperation(this.ctx, op, fence));
  }

  override async finishOperation(
    operationKey: string,
    outcome: { state: 'committed'; result: string } | { state: 'failed'; error: string },
    fence: Fence & { runId: string },
  ): Promise<void> {
    await this.call('finishOperation', fence.runId, () => ops.finishOperation(this.ctx, operationKey, outcome, fence));
  }

  async listOperations(runId: string): Promise<OperationRecord[]> {
    return this.call('listOperations', runId, () => ops.listOperations(this.ctx, runId));
  }

  writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
    return this.call('writeOperation', record.runId, () => ops.writeOperation(this.ctx, record, condition));
  }

  // Overrides the derived default (three reads and three writes): one Lua script.
  override async cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    return this.call('cancelRun', runId, () => runs.cancelRun(this.ctx, runId, resumeHint));
  }

  replaceSteps(runId: string, change: StepsChange): Promise<void> {
    return this.call('replaceSteps', runId, () => maintenance.replaceSteps(this.ctx, runId, change));
  }

  async deleteRun(runId: string): Promise<void> {
    await this.call('deleteRun', runId, () => maintenance.deleteRun(this.ctx, runId));
  }

  /** One script: every swap compared and applied at once (see maintenance.ts). */
  async rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    return this.call('rewritePayloads', runId, () => maintenance.rewritePayloads(this.ctx, runId, rewrite));
  }

  /** Appends to the run's output stream: one script (fence, offset, XADDs); see streams.ts. */
  override appendEvents(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number> {
    return this.call('appendEvents', runId, () => streams.appendEvents(this.ctx, runId, events, fence));
  }

  /** The run's stream events from `from` on: XRANGE pages of entries (one per append). */
  override readEvents(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
    return this.call('readEvents', runId, () => streams.readEvents(this.ctx, runId, from, limit));
  }

  /** Waits with XREAD BLOCK on a connection of the waiter's own (see streams.ts). */
  override waitForEvents(runId: string, from: number, signal: AbortSignal): Promise<boolean> {
    return this.call('waitForEvents', runId, () => streams.waitForEvents(this.ctx, runId, from, signal));
  }

  /** Deletes the run's stream key. */
  override dropStream(runId: string): Promise<number> {
    return this.call('dropStream', runId, () => streams.dropStream(this.ctx, runId));
  }

  /** The run's next stream offset: its last entry's id (one XREVRANGE). */
  override streamLength(runId: string): Promise<number> {
    return this.call('streamLength', runId, () => streams.streamLength(this.ctx, runId));
  }

  /**
   * A copy of the run from another tier, written only if the run is absent here (with its steps and
   * operations, at once). The run comes in without a lease and with its epoch raised by `epochJump`.
   * Returns false when the run already existed (nothing was written).
   */
  async importRun(loaded: LoadedRun, operations: readonly OperationRecord[], epochJump: number): Promise<boolean> {
    return this.call('importRun', loaded.run.runId, () => importRun(this.client, this.keys, this.ttlSeconds, loaded.run, loaded.steps, operations, epochJump));
  }

  /** The run and its steps from `fromSequence` on, read in one snapshot; null when the run is not here. */
  async readTail(runId: string, fromSequence: number): Promise<{ run: RunRecord; steps: StepRecord[] } | null> {
    return this.call('readTail', runId, () => readTail(this.client, this.keys, runId, fromSequence));
  }

  /**
   * Runs one store operation: connects on first use (so a store that was never `init`ed still works),
   * passes Waypoint's own errors through (LeaseLostError, CheckpointCorruptedError) and wraps everything
   * else: a refused connection or a timeout into STORE_UNAVAILABLE, an error reply Redis gives the command
   * itself into STORE_REJECTED (storeFailure).
   */
  private async call<T>(operation: string, runId: string | undefined, work: () => Promise<T>): Promise<T> {
    try {
      if (this.client.status !== 'ready') await this.connected(); // the hot path skips the extra await
      return await work();
    } catch (error) {
      if (error instanceof WaypointError) throw error;
      throw storeFailure(this.backend, operation, error, runId);
    }
  }

  private async connected(): Promise<void> {
    // Connect explicitly only the first time: afterwards ioredis reconnects by itself, and commands sent
    // while it does fail at once (no offline queue) rather than wait.
    if (this.client.status === 'wait' && this.connecting === undefined) {
      this.connecting = this.client.connect().finally(() => {
        this.connecting = undefined;
      });
    }
    if (this.connecting) await this.connecting;
  }
}
