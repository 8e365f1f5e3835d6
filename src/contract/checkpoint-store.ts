import { LeaseLostError, RunLockedError } from './errors';
import type { StoredStreamEvent, StreamEvent } from './run-stream';
import {
  FINAL_STATUSES,
  type Fence,
  type LeaseGrant,
  type LoadedRun,
  type NewOperation,
  type NewRun,
  type OperationOutcome,
  type OperationCondition,
  type OperationRecord,
  type OperationState,
  type OperationWrite,
  type PayloadRewrite,
  type RewriteOutcome,
  type RunFilter,
  type RunPatch,
  type RunCursor,
  type RunRecord,
  type StepAppend,
  type StepRecord,
  type StepsChange,
} from './records';

export * from './records';
export { type RunStreamStore, type StoredStreamEvent, type StreamEvent, MAX_STREAM_READ, checkStreamAppend, checkStreamRead, supportsStreams } from './run-stream';

/**
 * The checkpoint store contract. Every backend (memory, TypeORM on SQLite / PostgreSQL, Redis, tiered)
 * implements it and passes the one conformance suite shipped as `waypoint-durable/testing`.
 *
 * Data model: append, don't rewrite. A run is one `RunRecord` (its cursor, status and lease) plus one
 * `StepRecord` per completed step, plus the committed-operations log of side effects. Payloads (input,
 * outputs, memories, operation results) are opaque strings produced by the runtime's serializer; a store
 * never parses them.
 *
 * Fencing: every write that advances a run carries the writer's lease epoch. The store applies it only if
 * the run's current `leaseEpoch` equals it, atomically with the write, and otherwise throws
 * `LeaseLostError`; so a stale executor can never advance a run.
 */

/**
 * One open transaction on the store's own database, for one step attempt (the optional capability
 * `CheckpointStore.beginTransaction`). A transactional side effect writes through `manager` (a TypeORM
 * `EntityManager` on the SQL backends); its operation record and the step's checkpoint row go through
 * the methods below; `commit` makes all of it durable at once and `rollback` (or a crash) discards all
 * of it. Not safe for concurrent use: the runtime runs one effect at a time in it.
 *
 * @example
 * const tx = await store.beginTransaction!(runId, fence);
 * try {
 *   await tx.savepoint();
 *   await tx.manager.query('INSERT INTO ledger ...');
 *   await tx.recordOperation({ operationKey, runId, stepKey, name }, { state: 'committed', result: '{}' });
 *   await tx.releaseSavepoint();
 *   await tx.appendStep({ step, run, fence });   // fenced; rejected with LeaseLostError when stale
 *   await tx.commit();
 * } finally {
 *   await tx.rollback();                         // a no-op after commit
 * }
 */
export interface StoreTransaction<M = unknown> {
  /** Handle for the effect's own reads and writes inside the transaction (TypeORM `EntityManager` on SQL). */
  readonly manager: M;
  /**
   * True when the transaction holds the database's only write lock (SQLite): until it ends, nothing
   * can be recorded outside it, so a step must not run non-transactional effects after opening it.
   */
  readonly exclusive: boolean;
  /** The operation as this transaction sees it (its own uncommitted writes included). */
  getOperation(operationKey: string): Promise<OperationRecord | null>;
  /**
   * Records one attempt of an operation: inserts it (attempts 1) or updates it (attempts + 1) with the
   * outcome, unless it is already committed. Returns the record as it stands afterwards.
   */
  recordOperation(op: NewOperation, outcome: OperationOutcome): Promise<OperationRecord>;
  /** Marks a point that `rollbackToSavepoint` returns to. One at a time: the runtime never nests its own. */
  savepoint(): Promise<void>;
  /** Keeps everything since the savepoint and forgets the savepoint. */
  releaseSavepoint(): Promise<void>;
  /** Undoes everything since the savepoint (the transaction stays usable) and forgets the savepoint. */
  rollbackToSavepoint(): Promise<void>;
  /** `CheckpointStore.appendStep` inside the transaction: fenced and sequence-checked the same way. */
  appendStep(append: StepAppend): Promise<void>;
  /** Makes every write of the transaction durable, then ends it. */
  commit(): Promise<void>;
  /** Discards every write of the transaction and ends it. Idempotent; a no-op after `commit`. */
  rollback(): Promise<void>;
}

/** How long the lease `CheckpointStore.cancelRun` takes over lives, should its process die before releasing it. */
export const CANCEL_LEASE_MS = 10_000;
/** Takeovers `cancelRun` tries before it gives up with `RunLockedError` (each lost only to a concurrent lease change). */
const CANCEL_ATTEMPTS = 8;

/**
 * The store contract, split in two.
 *
 * **Primitives** (16 abstract methods: what a backend must write, each atomic on its own):
 * - lifecycle: `init`, `close`;
 * - runs: `createRun` (insert-if-absent), `getRun`, `listRuns`, `updateRun` (optionally fenced),
 *   `deleteRun` (with its steps and operations);
 * - steps: `appendStep` (append one step record under a fence, moving the cursor), `listSteps`,
 *   `replaceSteps` (replaces a range of step rows atomically, optionally fenced and moving the run's
 *   cursor, which no other primitive can express);
 * - leases: `acquireLease`, `setLeaseExpiry` (extend or free the lease while owner and epoch are current);
 * - the operations log: `getOperation`, `listOperations`, `writeOperation` (one record under a
 *   condition: fenced by the run's epoch, never overwriting a committed record, or unfenced
 *   insert-if-absent for signals, since fencing a signal would stop the run's executor);
 * - `rewritePayloads` (a compare-and-swap per payload field, which no read-then-write over the other
 *   primitives could make safe against a live writer).
 *
 * **Derived** (10 concrete methods, written once here over the primitives): `loadRun`, `appendRun`,
 * `cancelRun`; `renewLease`, `releaseLease` (`setLeaseExpiry`); `compactSteps`, `truncateSteps`
 * (`replaceSteps`); `beginOperation`, `finishOperation`, `putOperation` (`writeOperation`).
 * A backend overrides one only where it is faster (one round trip on SQL, one Lua script on Redis) and
 * must keep the guarantee its doc comment states: the SQL and Redis stores override `beginOperation` and
 * `finishOperation`, which run around every side effect. Payload encryption is not part of a backend: it is a
 * `CheckpointPayloadCodec` applied by one wrapper (`CodecCheckpointStore`, `EncryptingCheckpointStore`).
 *
 * A store written against the primitives alone passes the whole conformance suite
 * (`runStoreConformance` from `waypoint-durable/testing`); test/storage/minimal-store.ts is one.
 */
export abstract class CheckpointStore {
  /** Short backend name for messages and metrics: 'memory', 'sqlite', 'postgres', 'redis', 'tiered'. */
  abstract readonly backend: string;

  /**
   * Where the data lives (an absolute SQLite path, PostgreSQL host/port/database/schema, Redis
   * host/port/db/key prefix): equal for two store objects opened on the same data, so the runtime can
   * keep one executor per run across every Waypoint of a process. Wrappers report their inner store's.
   * Undefined when unknown (the memory store: each object is its own database).
   */
  get location(): string | undefined {
    return undefined;
  }

  /** Connects and applies pending schema migrations (under a lock). Idempotent. */
  abstract init(): Promise<void>;
  abstract close(): Promise<void>;

  /** Inserts the run if absent. Returns the stored run and whether this call created it. */
  abstract createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }>;
  abstract getRun(runId: string): Promise<RunRecord | null>;
  /**
   * Derived: the run row and its step rows up to the run's `lastSequence` as read (`getRun`, then
   * `listSteps`), so a step appended between the two reads is left to the next load. Backends that can
   * read both at once override it (one round trip on SQL).
   */
  async loadRun(runId: string): Promise<LoadedRun | null> {
    const run = await this.getRun(runId);
    if (!run) return null;
    return { run, steps: await this.listSteps(runId, { toSequence: run.lastSequence }) };
  }
  abstract listRuns(filter?: RunFilter): Promise<RunRecord[]>;
  /** Step rows with fromSequence <= sequence <= toSequence, ordered by sequence. */
  abstract listSteps(runId: string, range?: { fromSequence?: number; toSequence?: number }): Promise<StepRecord[]>;

  /**
   * Records a completed step and moves the run's cursor, atomically. Requires
   * `step.sequence === run.lastSequence + 1` and a current fence; throws `LeaseLostError` otherwise.
   */
  abstract appendStep(append: StepAppend): Promise<void>;

  /**
   * Records several consecutive steps of one run (sequences ascending without gaps, one fence), as a
   * control-flow run does when branches or items end together. SQL backends write them in one statement
   * and commit, all or none; the default appends them one by one (each fenced, so a stale writer still
   * writes nothing after the first rejection). The last append's cursor and status are the run's.
   */
  async appendRun(appends: readonly StepAppend[]): Promise<void> {
    for (const append of appends) await this.appendStep(append);
  }
  /** Updates run fields; with a fence, only while that epoch is current (else `LeaseLostError`). */
  abstract updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void>;

  /**
   * Takes the run's lease for `owner` if it is free, expired, already held by `owner`, or held by
   * `takeOverFrom` (an owner the caller knows to be dead); increments the epoch. Returns null (and changes
   * nothing) when another owner holds an unexpired lease.
   */
  abstract acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null>;
  /**
   * The lease primitive behind `renewLease` and `releaseLease`: while `owner` holds the lease at `epoch`,
   * sets its expiry to `ttlMs` from the store's clock, or with `null` frees it (owner and expiry cleared,
   * the epoch kept: it is never reused). Returns false, changing nothing, when `owner` and `epoch` are not
   * the run's current ones (the lease was lost or taken over) or the run is unknown. Atomic.
   */
  abstract setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean>;
  /** Derived: extends the lease by `ttlMs`; false when the epoch is no longer current (the lease was lost). */
  renewLease(runId: string, owner: string, epoch: number, ttlMs: number): Promise<boolean> {
    return this.setLeaseExpiry(runId, owner, epoch, ttlMs);
  }
  /** Derived: frees the lease if still held at this epoch; a no-op otherwise. The epoch is kept (never reused). */
  async releaseLease(runId: string, owner: string, epoch: number): Promise<void> {
    await this.setLeaseExpiry(runId, owner, epoch, null);
  }

  abstract getOperation(operationKey: string): Promise<OperationRecord | null>;
  abstract listOperations(runId: string): Promise<OperationRecord[]>;

  /**
   * The operations-log primitive behind `beginOperation`, `finishOperation` and `putOperation`: writes
   * `record` (the store stamps `updatedAt`, and `createdAt` when it inserts) under `condition`, atomically
   * with the check, and returns the record as stored afterwards.
   * - `{ fence }`: only while `fence.epoch` is run `record.runId`'s current epoch, else nothing is written
   *   and `LeaseLostError` is thrown; a stored record that is `committed` is left as it is (and returned).
   * - `{ ifAbsent: true }`: unfenced; inserts only when no record has the key, else returns that one unchanged.
   */
  abstract writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord>;

  /**
   * Records the operation as `started` (attempts + 1) unless it is already committed; returns the record
   * as it stands after the call. Fenced.
   *
   * Derived: reads the record, then one fenced `writeOperation` (which never overwrites a committed
   * record, so a commit between the two is kept). Only the lease holder writes under the fence, so the
   * attempt count read is the one it updates. The SQL and Redis stores override it with their single
   * round trip (it runs before every side effect: see `core/step/idempotency-guard.ts`).
   */
  async beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    const existing = await this.getOperation(op.operationKey);
    const record: OperationWrite = !existing
      ? { ...op, state: 'started', result: null, error: null, attempts: 1 }
      : existing.state === 'committed'
        ? existing
        : { ...withoutTimes(existing), state: 'started', attempts: existing.attempts + 1 };
    return this.writeOperation(record, { fence });
  }

  /**
   * Marks a started operation committed (with its result) or failed (with its error). Fenced. A
   * committed or unknown operation is left as it is.
   *
   * Derived: reads the record, then one fenced `writeOperation`; for an unknown operation it only checks
   * the fence. The SQL and Redis stores override it with their single round trip (it runs after every
   * side effect: see `core/step/idempotency-guard.ts`).
   */
  async finishOperation(operationKey: string, outcome: OperationOutcome, fence: Fence & { runId: string }): Promise<void> {
    const existing = await this.getOperation(operationKey);
    if (!existing) {
      const run = await this.getRun(fence.runId);
      if (!run || run.leaseEpoch !== fence.epoch) throw new LeaseLostError(fence.runId, fence.epoch);
      return;
    }
    const done = outcome.state === 'committed' ? { state: outcome.state, result: outcome.result, error: null } : { state: outcome.state, error: outcome.error };
    await this.writeOperation({ ...withoutTimes(existing), ...done }, { fence });
  }

  /**
   * Records an operation written from outside any executor (a signal delivered to a waiting run),
   * unfenced, insert-if-absent: an existing record with that key is returned unchanged.
   *
   * Derived: one `writeOperation` with `{ ifAbsent: true }`.
   */
  putOperation(op: NewOperation & { state: OperationState; result: string | null; error: string | null }): Promise<OperationRecord> {
    return this.writeOperation(
      { operationKey: op.operationKey, runId: op.runId, stepKey: op.stepKey, name: op.name, state: op.state, result: op.result, error: op.error, attempts: 1 },
      { ifAbsent: true },
    );
  }

  /**
   * Moves a run that is not completed or cancelled (failed runs included) to `cancelled` and fences out
   * its executor: the lease is cleared and the epoch incremented, so the executor's next write or
   * renewal fails. Returns the run as it stands afterwards (unchanged when already completed or
   * cancelled), or null when unknown.
   *
   * Derived from the lease primitives: it takes the lease over from its holder (`acquireLease` with
   * `takeOverFrom`, which bumps the epoch and so fences the executor out before anything else is
   * written), re-reads the status under that lease, writes `cancelled` with a fenced `updateRun`, and
   * releases the lease (the epoch is kept). A run that completed before the takeover stays completed
   * (with its epoch bumped by the takeover, which nothing reads once a run is final).
   * Of concurrent cancels each returns the cancelled run, one possibly while another's takeover lease is
   * still held (it is released before that call returns). If the process dies in between, the takeover
   * lease simply expires after `CANCEL_LEASE_MS`. Backends
   * that can do it in one conditional write override it (one statement on SQL, one Lua script on Redis).
   */
  async cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    const owner = `cancel:${runId}:${Date.now().toString(36)}:${Math.random().toString(36).slice(2, 10)}`;
    let seen: RunRecord | null = null;
    for (let attempt = 0; attempt < CANCEL_ATTEMPTS; attempt += 1) {
      seen = await this.getRun(runId);
      if (!seen || FINAL_STATUSES.has(seen.status)) return seen;
      const grant = await this.acquireLease(runId, owner, CANCEL_LEASE_MS, seen.leaseOwner ?? undefined);
      if (!grant) continue; // another owner took the lease between the read and the takeover: read again
      try {
        const current = await this.getRun(runId);
        // Completed just before the takeover: it stays completed (the takeover only bumped its epoch).
        if (current && !FINAL_STATUSES.has(current.status)) await this.updateRun(runId, { status: 'cancelled', resumeHint }, { epoch: grant.epoch });
      } catch (error) {
        if (error instanceof LeaseLostError) continue; // a concurrent cancel (or executor takeover) won: read again
        throw error;
      } finally {
        await this.releaseLease(runId, owner, grant.epoch);
      }
      return this.getRun(runId);
    }
    throw new RunLockedError(runId, seen?.leaseOwner ?? null, seen?.leaseExpiresAt ?? null);
  }

  /**
   * The step-log primitive behind `compactSteps` and `truncateSteps`: replaces a range of run `runId`'s
   * step rows as `change` says, atomically (one transaction on SQL, one Lua script on Redis), with its
   * conditions (`fence`, `onlyIfBefore`) checked in the same atomic step. The operations are untouched,
   * and so is the run row unless `change.cursor` is given. An unknown run is a no-op, or `LeaseLostError`
   * when fenced.
   */
  abstract replaceSteps(runId: string, change: StepsChange): Promise<void>;

  /**
   * Retention: atomically replaces every step row with sequence <= `base.sequence` by `base` (a base
   * snapshot row at that same sequence). Rows after it, the run row and the operations are untouched.
   * A no-op when the run's oldest row is already at or after `base.sequence`.
   *
   * Derived: one `replaceSteps` of the range `1..base.sequence`, only if a row older than the base is left.
   */
  compactSteps(runId: string, base: StepRecord): Promise<void> {
    return this.replaceSteps(runId, { fromSequence: 1, toSequence: base.sequence, rows: [base], onlyIfBefore: base.sequence });
  }

  /**
   * Drops the step rows with sequence >= `fromSequence` (falling back past a corrupted row) and sets the
   * run's lastSequence to `fromSequence - 1` (the last row kept, for a cut past the end) and its cursor as
   * given. Fenced.
   *
   * Derived: one fenced `replaceSteps` of the range from `fromSequence` to the end, with no rows.
   */
  truncateSteps(runId: string, fromSequence: number, cursor: RunCursor, fence: Fence): Promise<void> {
    return this.replaceSteps(runId, { fromSequence, rows: [], fence, cursor: { cursorAgent: cursor.cursorAgent, cursorStep: cursor.cursorStep } });
  }

  /** Deletes a run with its steps and operations (tests, pruning). */
  abstract deleteRun(runId: string): Promise<void>;

  /**
   * Maintenance (re-encryption under a new key): replaces stored payloads of run `runId` in place. Each
   * field is a compare-and-swap: the stored value becomes `to` only where it still equals `from`, so a
   * rewrite racing a live executor, a compaction, a truncation or an operation finishing never
   * overwrites newer data; a value that no longer matches (or a row that is gone) is counted as skipped,
   * not an error. An operation is only touched when it belongs to `runId`. An unknown run is a no-op
   * (every swap skipped), like a run deleted just before the call.
   *
   * Not fenced: it does not advance the run, and it changes nothing but the payloads named: never a
   * digest (`sha256` is over the plaintext, which a re-encryption keeps), status, sequence, cursor,
   * checkpoint id, attempt count, lease, or `updatedAt` (listings stay in the same order). Atomic per
   * call where the backend allows it: one transaction on SQL, one Lua script on Redis.
   *
   * @example
   * const { rewritten, skipped } = await store.rewritePayloads('q3-aapl', {
   *   input: { from: oldSealedInput, to: newSealedInput },
   *   steps: [{ sequence: 1, output: { from: oldOutput, to: newOutput } }],
   * });
   */
  abstract rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome>;

  /**
   * Optional capability: opens a transaction on the store's own database for one step attempt of
   * `runId`, after checking `fence` (throws `LeaseLostError` when it is stale). Transactional side
   * effects run in it and the step's checkpoint commits with them. Backends that cannot share a
   * transaction with user code (memory, Redis) leave it undefined; a transactional side effect then
   * fails with `TransactionsUnsupportedError`.
   */
  beginTransaction?(runId: string, fence: Fence): Promise<StoreTransaction>;

  /**
   * Optional capability, the run's output stream (issue 37; see `RunStreamStore` in run-stream.ts for
   * the guarantees of each method): appends a batch of events, all or none, fenced when `fence` is
   * given, and returns the offset of the first. Every backend of this package has the four stream
   * methods; `supportsStreams(store)` tells whether a store has them. `deleteRun` deletes the stream,
   * `compactSteps` and `truncateSteps` leave it.
   */
  appendEvents?(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number>;
  /** Optional capability: the run's stream events with `offset >= from`, at most `limit` (see `RunStreamStore`). */
  readEvents?(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]>;
  /** Optional capability: true once the stream has an event at `offset >= from`, false when `signal` aborts first (see `RunStreamStore`). */
  waitForEvents?(runId: string, from: number, signal: AbortSignal): Promise<boolean>;
  /** Optional capability: how many events the run's stream holds (see `RunStreamStore`). */
  streamLength?(runId: string): Promise<number>;
  /** Optional capability (stream retention): deletes run `runId`'s stream events, returning how many; the run stays and its stream
   * reads as new (length 0). Only for a run that appends no more (completed, cancelled); an unknown run: 0. */
  dropStream?(runId: string): Promise<number>;
}

/**
 * True when `store` offers transactions (see `CheckpointStore.beginTransaction`).
 *
 * @example
 * if (!supportsTransactions(waypoint.store)) console.warn('transactional side effects need a SQL store');
 */
export function supportsTransactions(store: CheckpointStore): store is CheckpointStore & Required<Pick<CheckpointStore, 'beginTransaction'>> {
  return typeof store.beginTransaction === 'function';
}

/** The record without the times the store stamps (`OperationWrite`). */
function withoutTimes(record: OperationRecord): OperationWrite {
  const { createdAt: _created, updatedAt: _updated, ...rest } = record;
  return rest;
}
