import type { Redis } from 'ioredis';
import { DEFAULT_REDIS_URL, ownRedisClient } from '../redis-client';
import { LeaseLostError, WaypointError, storeFailure } from '../../contract/errors';
import {
  CheckpointStore,
  type Fence,
  type LeaseGrant,
  type LoadedRun,
  type NewOperation,
  type NewRun,
  type OperationRecord,
  type OperationState,
  type PayloadRewrite,
  type RewriteOutcome,
  type RunFilter,
  type RunPatch,
  type RunRecord,
  type StepAppend,
  type StepRecord,
} from '../../contract/checkpoint-store';
import { decodeStep, encodeStep, encodeText, nullableArg, pairs, rewriteArgs, toOperationRecord, toRunRecord } from './codec';
import { ALL_STATUSES, DEFAULT_KEY_PREFIX, redisKeys, type RedisKeys } from './keys';
import { journaledScript, type JournalEntry } from './journal';
import { execOrThrow, listRunsFromIndexes } from './list-runs';
import { defineReplicaScripts, importRun, readTail, type ReplicaScripts } from './replica';
import { defineScripts, type ScriptCommands, type ScriptName } from './scripts';
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
  private readonly journal: string | undefined;
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
    this.journal = options.journal;
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
    return this.call('createRun', run.runId, async () => {
      const { stems } = this.keys;
      const [created, flat] = (await this.write(
        'waypointCreateRun',
        { r: run.runId, k: 'u' },
        this.keys.run(run.runId),
        this.keys.runsIndex(),
        run.runId,
        run.pipelineName,
        run.pipelineVersion,
        encodeText(run.input),
        encodeText(run.metadata),
        stems.status,
        stems.pipeline,
        run.parentRunId ?? '',
        stems.parent,
        ...ALL_STATUSES,
      )) as [number, string[]];
      return { run: toRunRecord(pairs(flat))!, created: created === 1 };
    });
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    return this.call('getRun', runId, async () => toRunRecord(await this.client.hgetall(this.keys.run(runId))));
  }

  // Overrides the derived default: one MULTI, one round trip, one snapshot.
  override async loadRun(runId: string): Promise<LoadedRun | null> {
    return this.call('loadRun', runId, async () => {
      // One round trip, one consistent snapshot: MULTI runs both reads with no write in between.
      const [runHash, stepsHash] = (await execOrThrow(this.client.multi().hgetall(this.keys.run(runId)).hgetall(this.keys.steps(runId)))) as Record<string, string>[];
      const run = toRunRecord(runHash);
      if (!run) return null;
      const steps = Object.entries(stepsHash).map(([field, value]) => decodeStep(runId, field, value));
      return { run, steps: steps.sort((a, b) => a.sequence - b.sequence) };
    });
  }

  async listRuns(filter: RunFilter = {}): Promise<RunRecord[]> {
    return this.call('listRuns', undefined, () => listRunsFromIndexes(this.client, this.keys, filter));
  }

  async listSteps(runId: string, range: { fromSequence?: number; toSequence?: number } = {}): Promise<StepRecord[]> {
    return this.call('listSteps', runId, async () => {
      const flat = (await this.client.waypointListSteps(
        this.keys.run(runId),
        this.keys.steps(runId),
        range.fromSequence ?? 1,
        range.toSequence ?? Number.MAX_SAFE_INTEGER,
      )) as string[];
      const steps: StepRecord[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) steps.push(decodeStep(runId, flat[i], flat[i + 1]));
      return steps;
    });
  }

  async appendStep({ step, run, fence }: StepAppend): Promise<void> {
    await this.call('appendStep', step.runId, async () => {
      const { stems } = this.keys;
      const outcome = await this.write(
        'waypointAppendStep',
        { r: step.runId, k: 'u' },
        this.keys.run(step.runId),
        this.keys.steps(step.runId),
        this.keys.runOperations(step.runId),
        this.keys.runsIndex(),
        fence.epoch,
        step.sequence,
        encodeStep(step),
        run.cursorAgent,
        run.cursorStep,
        run.status,
        nullableArg(run.resumeHint),
        stems.status,
        stems.pipeline,
        stems.operation,
        this.ttlSeconds,
      );
      if (outcome === 'FENCED') throw new LeaseLostError(step.runId, fence.epoch);
      if (outcome === 'SEQUENCE') throw new LeaseLostError(step.runId, fence.epoch, step.stepName);
    });
  }

  async updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    await this.call('updateRun', runId, async () => {
      const { stems } = this.keys;
      const outcome = await this.write(
        'waypointUpdateRun',
        { r: runId, k: 'u' },
        this.keys.run(runId),
        this.keys.steps(runId),
        this.keys.runOperations(runId),
        this.keys.runsIndex(),
        fence ? '1' : '0',
        fence?.epoch ?? 0,
        patch.status ?? '',
        patch.pipelineVersion ?? '',
        patch.cursorAgent ?? '',
        patch.cursorStep ?? '',
        nullableArg(patch.error),
        nullableArg(patch.resumeHint),
        stems.status,
        stems.pipeline,
        stems.operation,
        this.ttlSeconds,
      );
      if (outcome === 'FENCED') throw new LeaseLostError(runId, fence?.epoch ?? 0);
    });
  }

  async acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    return this.call('acquireLease', runId, async () => {
      const grant = (await this.write('waypointAcquireLease', { r: runId, k: 'u' }, this.keys.run(runId), owner, ttlMs, takeOverFrom ?? '')) as [number, string] | null;
      return grant ? { owner, epoch: Number(grant[0]), expiresAt: new Date(Number(grant[1])) } : null;
    });
  }

  async renewLease(runId: string, owner: string, epoch: number, ttlMs: number): Promise<boolean> {
    return this.call('renewLease', runId, async () => (await this.client.waypointRenewLease(this.keys.run(runId), owner, epoch, ttlMs)) === 1);
  }

  async releaseLease(runId: string, owner: string, epoch: number): Promise<void> {
    await this.call('releaseLease', runId, () => this.write('waypointReleaseLease', { r: runId, k: 'u' }, this.keys.run(runId), owner, epoch));
  }

  async getOperation(operationKey: string): Promise<OperationRecord | null> {
    return this.call('getOperation', undefined, async () => toOperationRecord(await this.client.hgetall(this.keys.operation(operationKey))));
  }

  async beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    return this.call('beginOperation', op.runId, async () => {
      const reply = await this.write(
        'waypointBeginOperation',
        { r: op.runId, k: 'u', o: op.operationKey },
        this.keys.run(op.runId),
        this.keys.operation(op.operationKey),
        this.keys.steps(op.runId),
        this.keys.runOperations(op.runId),
        fence.epoch,
        op.operationKey,
        op.runId,
        op.stepKey,
        op.name,
        this.keys.stems.operation,
        this.ttlSeconds,
      );
      if (reply === 'FENCED') throw new LeaseLostError(op.runId, fence.epoch);
      return toOperationRecord(pairs(reply))!;
    });
  }

  async finishOperation(
    operationKey: string,
    outcome: { state: 'committed'; result: string } | { state: 'failed'; error: string },
    fence: Fence & { runId: string },
  ): Promise<void> {
    await this.call('finishOperation', fence.runId, async () => {
      const payload = outcome.state === 'committed' ? outcome.result : outcome.error;
      const reply = await this.write(
        'waypointFinishOperation',
        { r: fence.runId, k: 'u', o: operationKey },
        this.keys.run(fence.runId),
        this.keys.operation(operationKey),
        fence.epoch,
        outcome.state,
        encodeText(payload),
      );
      if (reply === 'FENCED') throw new LeaseLostError(fence.runId, fence.epoch);
    });
  }

  async listOperations(runId: string): Promise<OperationRecord[]> {
    return this.call('listOperations', runId, async () => {
      const hashes = (await this.client.waypointListOperations(this.keys.runOperations(runId), this.keys.stems.operation)) as unknown[];
      return hashes.map((flat) => toOperationRecord(pairs(flat))!);
    });
  }

  async putOperation(op: NewOperation & { state: OperationState; result: string | null; error: string | null }): Promise<OperationRecord> {
    return this.call('putOperation', op.runId, async () => {
      const reply = await this.write(
        'waypointPutOperation',
        { r: op.runId, k: 'u', o: op.operationKey },
        this.keys.run(op.runId),
        this.keys.operation(op.operationKey),
        this.keys.steps(op.runId),
        this.keys.runOperations(op.runId),
        op.operationKey,
        op.runId,
        op.stepKey,
        op.name,
        op.state,
        nullableArg(op.result),
        nullableArg(op.error),
        this.keys.stems.operation,
        this.ttlSeconds,
      );
      return toOperationRecord(pairs(reply))!;
    });
  }

  // Overrides the derived default (three reads and three writes): one Lua script.
  override async cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    return this.call('cancelRun', runId, async () => {
      const { stems } = this.keys;
      const reply = await this.write(
        'waypointCancelRun',
        { r: runId, k: 'u' },
        this.keys.run(runId),
        this.keys.steps(runId),
        this.keys.runOperations(runId),
        this.keys.runsIndex(),
        encodeText(resumeHint),
        stems.status,
        stems.pipeline,
        stems.operation,
        this.ttlSeconds,
      );
      return reply === null ? null : toRunRecord(pairs(reply));
    });
  }

  async compactSteps(runId: string, base: StepRecord): Promise<void> {
    await this.call('compactSteps', runId, () =>
      this.write('waypointCompactSteps', { r: runId, k: 'u', c: base.sequence }, this.keys.steps(runId), base.sequence, encodeStep(base)),
    );
  }

  async truncateSteps(runId: string, fromSequence: number, cursor: { cursorAgent: number; cursorStep: number }, fence: Fence): Promise<void> {
    await this.call('truncateSteps', runId, async () => {
      const { stems } = this.keys;
      const reply = await this.write(
        'waypointTruncateSteps',
        { r: runId, k: 'u', t: fromSequence },
        this.keys.run(runId),
        this.keys.steps(runId),
        this.keys.runsIndex(),
        fence.epoch,
        fromSequence,
        cursor.cursorAgent,
        cursor.cursorStep,
        stems.status,
        stems.pipeline,
      );
      if (reply === 'FENCED') throw new LeaseLostError(runId, fence.epoch);
    });
  }

  async deleteRun(runId: string): Promise<void> {
    await this.call('deleteRun', runId, () => {
      const { stems } = this.keys;
      return this.write(
        'waypointDeleteRun',
        { r: runId, k: 'd' },
        this.keys.run(runId),
        this.keys.steps(runId),
        this.keys.runOperations(runId),
        this.keys.runsIndex(),
        runId,
        stems.status,
        stems.pipeline,
        stems.operation,
        stems.parent,
        ...ALL_STATUSES,
      );
    });
  }

  /**
   * One script: every swap compared and applied at once. With a journal, its notice names the rewritten
   * step range and operations, so a replica copies them again (rows it already has are not re-read otherwise).
   */
  async rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    return this.call('rewritePayloads', runId, async () => {
      const swaps = rewriteArgs(rewrite);
      if (swaps.length === 0) return { rewritten: 0, skipped: 0 };
      const entry: JournalEntry = { r: runId, k: 'u' };
      const steps = rewrite.steps ?? [];
      if (steps.length > 0) entry.p = steps.reduce((low, s) => Math.min(low, s.sequence), Infinity);
      if ((rewrite.operations ?? []).length > 0) entry.a = 1;
      const [rewritten, skipped] = (await this.write(
        'waypointRewritePayloads',
        entry,
        this.keys.run(runId),
        this.keys.steps(runId),
        runId,
        this.keys.stems.operation,
        ...swaps,
      )) as [number, number];
      return { rewritten: Number(rewritten), skipped: Number(skipped) };
    });
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

  /** A write script, with its journal notice when the store keeps a journal. */
  private write(name: ScriptName, entry: JournalEntry, ...args: (string | number)[]): Promise<unknown> {
    return this.journal ? journaledScript(this.client, this.journal, name, args, entry) : this.client[name](...args);
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
