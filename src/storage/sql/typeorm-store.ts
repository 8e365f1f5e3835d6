import type { DataSource, EntityManager } from 'typeorm';
import { StoreUnavailableError, WaypointError, storeFailure } from '../../contract/errors';
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
import type { GroupCommitStats } from './group-commit';
import type { DialectOps } from './ops';
import { type ResolvedStoreOptions, type TypeOrmStoreOptions, resolveOptions } from './options';
import { openPostgres } from './postgres-open';
import { forgetOps, rememberOps } from './store-pool';
import { openSqlite } from './sqlite-open';
import { postgresLocation, sqliteLocation } from '../store-location';
import { betterSqlite3, pg } from '../drivers';

/**
 * The SQL checkpoint store, on SQLite (better-sqlite3, the embedded default) or PostgreSQL. `init()`
 * applies the versioned migrations through TypeORM under a lock; a database whose migrations are all
 * recorded (read with the raw driver) is opened without loading TypeORM at all (it loads on first use of
 * `dataSource` or of a transactional side effect, and adopts the store's connection or pool). The
 * per-step work goes straight to the native driver underneath it (the `pg` pool, the better-sqlite3
 * handle) with prepared statements, so a step append is one round trip on PostgreSQL and one
 * transaction on SQLite.
 *
 * Connection failures surface as `StoreUnavailableError` (code `STORE_UNAVAILABLE`), a statement or value
 * the database refuses (encoding, constraint, SQL) as `StoreRejectedError` (`STORE_REJECTED`); a fenced
 * write from a stale executor as `LeaseLostError` (code `LEASE_LOST`).
 *
 * @example
 * const store = new TypeOrmCheckpointStore({ type: 'postgres', url: 'postgres://app@db/app', schema: 'waypoint' });
 * await store.init();   // connects, migrates
 * const { run } = await store.createRun({ runId: 'q3-aapl', pipelineName: 'analysis', pipelineVersion: '1.0.0', input: '{}', metadata: '{}' });
 * await store.close();
 */
export class TypeOrmCheckpointStore extends CheckpointStore {
  readonly backend: 'sqlite' | 'postgres';
  private readonly options: ResolvedStoreOptions;
  private ops: DialectOps | null = null;
  private opening: Promise<void> | null = null;
  private readonly where: string | undefined;

  constructor(options: TypeOrmStoreOptions) {
    super();
    this.options = resolveOptions(options);
    this.backend = this.options.type;
    const o = this.options;
    this.where = o.type === 'sqlite' ? sqliteLocation(o.path, o.tablePrefix) : postgresLocation(o.url, o.schema, o.tablePrefix);
  }

  override get location(): string | undefined {
    return this.where;
  }

  /**
   * The TypeORM DataSource on the store's database, for reads and writes of your own next to the
   * checkpoints (e.g. `store.dataSource.transaction(...)`). Available after `init()`; on SQLite, TypeORM
   * is loaded on the first access when `init()` did not need it.
   */
  get dataSource(): DataSource {
    return this.current('dataSource').dataSource;
  }

  /**
   * How well PostgreSQL group commit is batching: statements sent and appends they carried (their ratio
   * is the appends per commit). Null on SQLite, with `groupCommit: false`, or before `init()`.
   *
   * @example
   * const { statements, appends } = store.groupCommitStats ?? { statements: 0, appends: 0 };
   */
  get groupCommitStats(): GroupCommitStats | null {
    return this.ops?.groupCommitStats ?? null;
  }

  /** Connects and applies pending migrations. Concurrent and repeated calls share one initialization. */
  async init(): Promise<void> {
    if (this.ops) return;
    this.opening ??= this.open().finally(() => (this.opening = null));
    return this.opening;
  }

  /** Closes the connection (pool or file handle). `init()` may be called again afterwards. */
  async close(): Promise<void> {
    await this.opening?.catch(() => undefined);
    const ops = this.ops;
    this.ops = null;
    forgetOps(this);
    await ops?.streams.close?.(); // the PostgreSQL listening connection
    ops?.releaseConnections?.();
    if (ops) await this.guard('close', undefined, () => ops.closeConnection());
  }

  createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    return this.guard('createRun', run.runId, () => this.current('createRun').createRun(run));
  }

  getRun(runId: string): Promise<RunRecord | null> {
    return this.guard('getRun', runId, () => this.current('getRun').getRun(runId));
  }

  // Overrides the derived default: one round trip (PostgreSQL) or one read transaction (SQLite).
  override loadRun(runId: string): Promise<LoadedRun | null> {
    return this.guard('loadRun', runId, () => this.current('loadRun').loadRun(runId));
  }

  listRuns(filter?: RunFilter): Promise<RunRecord[]> {
    return this.guard('listRuns', undefined, () => this.current('listRuns').listRuns(filter));
  }

  listSteps(runId: string, range?: { fromSequence?: number; toSequence?: number }): Promise<StepRecord[]> {
    return this.guard('listSteps', runId, () => this.current('listSteps').listSteps(runId, range));
  }

  appendStep(append: StepAppend): Promise<void> {
    return this.guard('appendStep', append.step.runId, () => this.current('appendStep').appendStep(append));
  }

  override appendRun(appends: readonly StepAppend[]): Promise<void> {
    return this.guard('appendRun', appends[0]?.step.runId, () => this.current('appendRun').appendRun(appends));
  }

  updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    return this.guard('updateRun', runId, () => this.current('updateRun').updateRun(runId, patch, fence));
  }

  acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    return this.guard('acquireLease', runId, () => this.current('acquireLease').acquireLease(runId, owner, ttlMs, takeOverFrom));
  }

  setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
    return this.guard('setLeaseExpiry', runId, () => this.current('setLeaseExpiry').setLeaseExpiry(runId, owner, epoch, ttlMs));
  }

  getOperation(operationKey: string): Promise<OperationRecord | null> {
    return this.guard('getOperation', undefined, () => this.current('getOperation').getOperation(operationKey));
  }

  // Overrides the derived begin and finish: the dialect's one round trip (one transaction on SQLite) each.
  override beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    return this.guard('beginOperation', op.runId, () => this.current('beginOperation').beginOperation(op, fence));
  }

  override finishOperation(operationKey: string, outcome: OperationOutcome, fence: Fence & { runId: string }): Promise<void> {
    return this.guard('finishOperation', fence.runId, () => this.current('finishOperation').finishOperation(operationKey, outcome, fence));
  }

  listOperations(runId: string): Promise<OperationRecord[]> {
    return this.guard('listOperations', runId, () => this.current('listOperations').listOperations(runId));
  }

  writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
    return this.guard('writeOperation', record.runId, () => this.current('writeOperation').writeOperation(record, condition));
  }

  // Overrides the derived default: one conditional UPDATE.
  override cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    return this.guard('cancelRun', runId, () => this.current('cancelRun').cancelRun(runId, resumeHint));
  }

  replaceSteps(runId: string, change: StepsChange): Promise<void> {
    return this.guard('replaceSteps', runId, () => this.current('replaceSteps').replaceSteps(runId, change));
  }

  deleteRun(runId: string): Promise<void> {
    return this.guard('deleteRun', runId, () => this.current('deleteRun').deleteRun(runId));
  }

  rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    return this.guard('rewritePayloads', runId, () => this.current('rewritePayloads').rewritePayloads(runId, rewrite));
  }

  /**
   * Appends to a run's output stream (see `RunStreamStore`): one statement on PostgreSQL (counter,
   * insert and NOTIFY), one transaction on SQLite.
   */
  override appendEvents(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number> {
    return this.guard('appendEvents', runId, () => this.current('appendEvents').streams.appendEvents(runId, events, fence));
  }

  /** A run's stream events from offset `from` on, at most `limit`: one primary-key range read. */
  override readEvents(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
    return this.guard('readEvents', runId, () => this.current('readEvents').streams.readEvents(runId, from, limit));
  }

  /**
   * Waits for a run's stream to reach `from` (see `RunStreamStore`): on PostgreSQL through the store's one
   * LISTEN connection (with a re-check every `PG_STREAM_RECHECK_MS`), on SQLite by polling every
   * `SQLITE_STREAM_POLL_MS` (appends through this same object wake it at once).
   */
  override waitForEvents(runId: string, from: number, signal: AbortSignal): Promise<boolean> {
    return this.guard('waitForEvents', runId, () => this.current('waitForEvents').streams.waitForEvents(runId, from, signal));
  }

  /** Deletes the run's stream (events and counter) in one statement or transaction; the run stays. */
  override dropStream(runId: string): Promise<number> {
    return this.guard('dropStream', runId, () => this.current('dropStream').streams.dropStream(runId));
  }

  /** How many events the run's stream holds: the counter on its run row. */
  override streamLength(runId: string): Promise<number> {
    return this.guard('streamLength', runId, () => this.current('streamLength').streams.streamLength(runId));
  }

  /**
   * Opens a step's transaction on the store's database, with a TypeORM `EntityManager` inside it; the
   * runtime calls it for transactional side effects. PostgreSQL: a dedicated pooled connection. SQLite:
   * the store's one connection, and every other call of this store waits until the transaction ends.
   * Throws `LeaseLostError` when `fence` is stale.
   */
  override beginTransaction(runId: string, fence: Fence): Promise<StoreTransaction<EntityManager>> {
    return this.guard('beginTransaction', runId, () => this.current('beginTransaction').beginTransaction(runId, fence));
  }

  private async open(): Promise<void> {
    const options = this.options;
    // A missing client package or native build is MISSING_DEPENDENCY with what to run, not an outage.
    if (options.type === 'sqlite') betterSqlite3();
    else pg();
    this.ops = await this.guard<DialectOps>('init', undefined, () => (options.type === 'sqlite' ? openSqlite(options) : openPostgres(options)));
    rememberOps(this, this.ops);
  }

  private current(operation: string): DialectOps {
    if (this.ops) return this.ops;
    // plain Error: the cause clause of the typed STORE_UNAVAILABLE thrown here.
    throw new StoreUnavailableError(this.backend, operation, new Error('the store is not initialized (call init() first, or it was closed)'));
  }

  /** Typed errors (LeaseLostError, ...) pass through; a driver error becomes STORE_UNAVAILABLE or STORE_REJECTED (storeFailure). */
  private async guard<T>(operation: string, runId: string | undefined, fn: () => Promise<T>): Promise<T> {
    try {
      // SQLite: while a step's transaction holds the one connection, anything else would run inside it.
      for (let busy = this.ops?.busy; busy; busy = this.ops?.busy) await busy;
      return await fn();
    } catch (err) {
      if (err instanceof WaypointError) throw err;
      throw storeFailure(this.backend, operation, err, runId);
    }
  }
}
