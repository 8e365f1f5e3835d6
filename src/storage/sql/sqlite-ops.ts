import type { DataSource, EntityManager } from 'typeorm';
import { LeaseLostError } from '../../contract/errors';
import type {
  Fence,
  LeaseGrant,
  LoadedRun,
  NewOperation,
  NewRun,
  OperationRecord,
  OperationCondition,
  OperationWrite,
  PayloadRewrite,
  PayloadSwap,
  RewriteOutcome,
  RunFilter,
  RunPatch,
  RunRecord,
  StepAppend,
  StepRecord,
  StepsChange,
  StoreTransaction,
} from '../../contract/checkpoint-store';
import type { DialectOps } from './ops';
import { ConnectionGate } from './connection-gate';
import { type Database, type Statement, type Transaction, writeAppend, writeSteadyAppend } from './sqlite-driver';
import { SqliteFileIdentity } from './sqlite-file-identity';
import { SqliteStreams } from './sqlite-stream';
import { SqliteTransaction } from './sqlite-transaction';
import { type Row, SQLITE_ENCODING, stepRow, toDate, toOperation, toRun, toStep } from './rows';
import { RUN_PATCH_COLUMNS, type RunPatchField, type Tables } from './sql';
import { type SqliteStatementName, sqliteListRuns, sqliteStatements, sqliteUpdateRun } from './sql-sqlite';
import type { SqliteDataSource } from './sqlite-data-source';
import { settled } from '../settled';

type Outcome = { state: 'committed'; result: string } | { state: 'failed'; error: string };
const PATCH_FIELDS = Object.keys(RUN_PATCH_COLUMNS) as RunPatchField[];

/**
 * The SQLite data methods, on the store's better-sqlite3 handle (opened by `openSqlite`) with every
 * statement prepared once. better-sqlite3 is synchronous, so each method is one uninterrupted piece of
 * work; the writes that must be atomic run in a `BEGIN IMMEDIATE` transaction.
 */
export class SqliteOps implements DialectOps {
  private readonly stmts: Record<SqliteStatementName, Statement>;
  private readonly dynamic = new Map<string, Statement>();
  // Transaction functions are built once: better-sqlite3 wraps each in BEGIN/COMMIT/ROLLBACK statements.
  private readonly appendTx: Transaction<[StepAppend, number], boolean>;
  private readonly appendRunTx: Transaction<[readonly StepAppend[], number], boolean>;
  private readonly loadTx: Transaction<[string], LoadedRun | null>;
  private readonly beginOpTx: Transaction<[NewOperation, number], Row>;
  private readonly finishOpTx: Transaction<[string, Outcome, Fence & { runId: string }], void>;
  private readonly writeOpTx: Transaction<[OperationWrite, OperationCondition], Row>;
  private readonly deleteTx: Transaction<[string], void>;
  private readonly replaceStepsTx: Transaction<[string, StepsChange], void>;
  private readonly rewriteTx: Transaction<[string, PayloadRewrite], RewriteOutcome>;

  private readonly gate = new ConnectionGate();
  readonly streams: SqliteStreams;

  // eslint-disable-next-line max-lines-per-function -- defines the store's prepared statements and transactions once: one short transaction body each
  constructor(
    private readonly source: SqliteDataSource,
    private readonly db: Database,
    private readonly tables: Tables,
    private readonly busyTimeoutMs: number,
    private readonly identity: SqliteFileIdentity,
  ) {
    this.streams = new SqliteStreams(db, tables, () => identity.checkAll());
    const texts = sqliteStatements(tables);
    this.stmts = Object.fromEntries(Object.entries(texts).map(([k, sql]) => [k, db.prepare(sql)])) as Record<SqliteStatementName, Statement>;
    this.appendTx = db.transaction((append: StepAppend, now: number) => writeAppend(this.stmts, append, now, true));
    // All or none: the first rejected append throws, which rolls the whole transaction back.
    this.appendRunTx = db.transaction((appends: readonly StepAppend[], now: number) => {
      for (const append of appends) if (!writeAppend(this.stmts, append, now)) throw new LeaseLostError(append.step.runId, append.fence.epoch, append.step.stepName);
      return true;
    });
    // One read transaction: the run row and its steps come from the same snapshot.
    this.loadTx = db.transaction((runId: string) => {
      const row = this.stmts.getRun.get({ run_id: runId });
      if (!row) return null;
      const steps = this.stmts.listSteps.all({ run_id: runId, from: 0, to: Number.MAX_SAFE_INTEGER });
      return { run: toRun(row), steps: steps.map(toStep) };
    });
    this.beginOpTx = db.transaction((op: NewOperation, epoch: number) => {
      this.checkFence(op.runId, epoch);
      const params = { operation_key: op.operationKey, run_id: op.runId, step_key: op.stepKey, name: op.name, now: Date.now() };
      // No row back means the operation is committed and was left as is.
      const row = this.stmts.beginOperation.get(params) ?? this.stmts.getOperation.get(params);
      // plain Error: an internal invariant (the upsert returns a row), wrapped as STORE_UNAVAILABLE if it ever breaks.
      if (!row) throw new Error(`operation '${op.operationKey}' was neither recorded nor found`);
      return row;
    });
    this.writeOpTx = db.transaction((record: OperationWrite, condition: OperationCondition) => {
      if ('fence' in condition) this.checkFence(record.runId, condition.fence.epoch);
      const params = {
        operation_key: record.operationKey,
        run_id: record.runId,
        step_key: record.stepKey,
        name: record.name,
        state: record.state,
        result: record.result,
        error: record.error,
        attempts: record.attempts,
        now: Date.now(),
      };
      ('fence' in condition ? this.stmts.upsertOperation : this.stmts.insertOperation).run(params);
      const row = this.stmts.getOperation.get(params);
      // plain Error: an internal invariant (the upsert returns a row), wrapped as STORE_UNAVAILABLE if it ever breaks.
      if (!row) throw new Error(`operation '${record.operationKey}' was neither recorded nor found`);
      return row;
    });
    this.finishOpTx = db.transaction((key: string, outcome: Outcome, fence: Fence & { runId: string }) => {
      this.checkFence(fence.runId, fence.epoch);
      const now = Date.now();
      if (outcome.state === 'committed') this.stmts.commitOperation.run({ operation_key: key, result: outcome.result, now });
      else this.stmts.failOperation.run({ operation_key: key, error: outcome.error, now });
    });
    this.replaceStepsTx = db.transaction((runId: string, change: StepsChange) => {
      const run_id = runId;
      if (change.fence) this.checkFence(runId, change.fence.epoch);
      else if (!this.stmts.runExists.get({ run_id })) return;
      if (change.onlyIfBefore !== undefined && !this.stmts.hasStepsBefore.get({ run_id, sequence: change.onlyIfBefore })) return;
      // A row replacing one at its own sequence keeps the cursor stored with it.
      const cursors = change.rows.map((row) => this.stmts.stepCursor.get({ run_id, sequence: row.sequence }));
      this.stmts.deleteStepRange.run({ run_id, from: change.fromSequence, to: change.toSequence ?? Number.MAX_SAFE_INTEGER });
      change.rows.forEach((row, i) => {
        this.stmts.insertStep.run({ ...stepRow(row, SQLITE_ENCODING), run_id, cursor_agent: cursors[i]?.cursor_agent ?? null, cursor_step: cursors[i]?.cursor_step ?? null });
      });
      if (change.cursor) this.stmts.rewindRun.run({ run_id, cursor_agent: change.cursor.cursorAgent, cursor_step: change.cursor.cursorStep, now: Date.now() });
    });
    this.rewriteTx = db.transaction((runId: string, rewrite: PayloadRewrite) => {
      const outcome: RewriteOutcome = { rewritten: 0, skipped: 0 };
      const swap = (stmt: Statement, change: PayloadSwap | undefined, keys: Record<string, unknown> = {}) => {
        if (!change) return;
        if (stmt.run({ run_id: runId, from: change.from, to: change.to, ...keys }).changes > 0) outcome.rewritten += 1;
        else outcome.skipped += 1;
      };
      swap(this.stmts.swapInput, rewrite.input);
      swap(this.stmts.swapRunError, rewrite.error);
      for (const { sequence, output, memory } of rewrite.steps ?? []) {
        swap(this.stmts.swapStepOutput, output, { sequence });
        swap(this.stmts.swapStepMemory, memory, { sequence });
      }
      for (const { operationKey, result, error } of rewrite.operations ?? []) {
        swap(this.stmts.swapOperationResult, result, { operation_key: operationKey });
        swap(this.stmts.swapOperationError, error, { operation_key: operationKey });
      }
      return outcome;
    });
    this.deleteTx = db.transaction((runId: string) => {
      this.stmts.deleteSteps.run({ run_id: runId });
      this.stmts.deleteOperations.run({ run_id: runId });
      this.streams.deleteEvents(runId);
      this.stmts.deleteRun.run({ run_id: runId });
    });
  }

  createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    return settled(() => {
      this.identity.checkAll();
      const { changes } = this.stmts.createRun.run({
        run_id: run.runId,
        pipeline_name: run.pipelineName,
        pipeline_version: run.pipelineVersion,
        input: run.input,
        metadata: run.metadata,
        now: Date.now(),
        parent_run_id: run.parentRunId ?? null,
      });
      const row = this.stmts.getRun.get({ run_id: run.runId });
      // plain Error: an internal invariant (the upsert returns a row), wrapped as STORE_UNAVAILABLE if it ever breaks.
      if (!row) throw new Error(`run '${run.runId}' was neither inserted nor found`);
      return { run: toRun(row), created: changes === 1 };
    });
  }

  getRun(runId: string): Promise<RunRecord | null> {
    return settled(() => {
      const row = this.stmts.getRun.get({ run_id: runId });
      return row ? toRun(row) : null;
    });
  }

  loadRun(runId: string): Promise<LoadedRun | null> {
    return settled(() => this.loadTx.deferred(runId));
  }

  listRuns(filter: RunFilter = {}): Promise<RunRecord[]> {
    return settled(() => {
      const { text, params } = sqliteListRuns(this.tables, filter);
      return this.statement(text).all(params).map(toRun);
    });
  }

  listSteps(runId: string, range: { fromSequence?: number; toSequence?: number } = {}): Promise<StepRecord[]> {
    return settled(() => {
      const rows = this.stmts.listSteps.all({
        run_id: runId,
        from: range.fromSequence ?? 1,
        to: range.toSequence ?? Number.MAX_SAFE_INTEGER,
      });
      return rows.map(toStep);
    });
  }

  appendStep(append: StepAppend): Promise<void> {
    return settled(() => {
      // One stat per step (the -wal is checked on the other writes, lease renewals included): see SqliteFileIdentity.
      this.identity.checkFile();
      // The steady insert commits on its own; the transaction (with the run-row transition) only when it wrote nothing.
      if (writeSteadyAppend(this.stmts, append)) return;
      if (!this.appendTx.immediate(append, Date.now())) {
        throw new LeaseLostError(append.step.runId, append.fence.epoch, append.step.stepName);
      }
    });
  }

  appendRun(appends: readonly StepAppend[]): Promise<void> {
    return settled(() => {
      this.identity.checkFile();
      if (appends.length > 0) this.appendRunTx.immediate(appends, Date.now());
    });
  }

  updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    return settled(() => {
      this.identity.checkAll();
      const fields = PATCH_FIELDS.filter((f) => patch[f] !== undefined);
      const params: Record<string, unknown> = { run_id: runId, now: Date.now(), epoch: fence?.epoch };
      for (const f of fields) params[RUN_PATCH_COLUMNS[f]] = patch[f];
      const { changes } = this.statement(sqliteUpdateRun(this.tables, fields, fence !== null)).run(params);
      if (fence && changes === 0) throw new LeaseLostError(runId, fence.epoch);
    });
  }

  acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    return settled(() => {
      this.identity.checkAll();
      const now = Date.now();
      const row = this.stmts.acquireLease.get({ run_id: runId, owner, dead: takeOverFrom ?? null, now, expires: now + Math.ceil(ttlMs) });
      return row ? { owner, epoch: row.lease_epoch as number, expiresAt: toDate(row.lease_expires_at) } : null;
    });
  }

  setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
    const expires = ttlMs === null ? null : Date.now() + Math.ceil(ttlMs);
    return settled(() => {
      this.identity.checkAll();
      return this.stmts.setLeaseExpiry.run({ run_id: runId, owner, epoch, expires }).changes > 0;
    });
  }

  getOperation(operationKey: string): Promise<OperationRecord | null> {
    return settled(() => {
      const row = this.stmts.getOperation.get({ operation_key: operationKey });
      return row ? toOperation(row) : null;
    });
  }

  // Overrides the derived begin and finish: one IMMEDIATE transaction each, around every side effect.
  beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    return settled(() => {
      this.identity.checkAll();
      return toOperation(this.beginOpTx.immediate(op, fence.epoch));
    });
  }

  finishOperation(operationKey: string, outcome: Outcome, fence: Fence & { runId: string }): Promise<void> {
    return settled(() => {
      this.identity.checkAll();
      this.finishOpTx.immediate(operationKey, outcome, fence);
    });
  }

  listOperations(runId: string): Promise<OperationRecord[]> {
    return settled(() => this.stmts.listOperations.all({ run_id: runId }).map(toOperation));
  }

  writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
    return settled(() => {
      this.identity.checkAll();
      return toOperation(this.writeOpTx.immediate(record, condition));
    });
  }

  async cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    this.identity.checkAll();
    this.stmts.cancelRun.run({ run_id: runId, resume_hint: resumeHint, now: Date.now() });
    return this.getRun(runId);
  }

  replaceSteps(runId: string, change: StepsChange): Promise<void> {
    return settled(() => {
      this.identity.checkAll();
      this.replaceStepsTx.immediate(runId, change);
    });
  }

  deleteRun(runId: string): Promise<void> {
    return settled(() => {
      this.identity.checkAll();
      this.deleteTx.immediate(runId);
    });
  }

  rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    return settled(() => {
      this.identity.checkAll();
      return this.rewriteTx.immediate(runId, rewrite);
    });
  }

  /** The TypeORM DataSource on this connection: TypeORM is loaded on first use (see `SqliteDataSource`). */
  get dataSource(): DataSource {
    return this.source.get();
  }

  /** Closes the connection (and the DataSource on it, if one was made). */
  closeConnection(): Promise<void> {
    return this.source.close();
  }

  /** Pending while a step's transaction holds the connection: the store makes every other call wait. */
  get busy(): Promise<void> | null {
    return this.gate.busy;
  }

  /** A step's transaction on the store's one connection (see `SqliteTransaction` for the trade-off). */
  beginTransaction(runId: string, fence: Fence): Promise<StoreTransaction<EntityManager>> {
    const context = { dataSource: this.dataSource, db: this.db, stmts: this.stmts, gate: this.gate, busyTimeoutMs: this.busyTimeoutMs };
    return settled(() => this.identity.checkAll()).then(() => SqliteTransaction.open(context, runId, fence));
  }

  private checkFence(runId: string, epoch: number): void {
    if (!this.stmts.fence.get({ run_id: runId, epoch })) throw new LeaseLostError(runId, epoch);
  }

  /** Statements whose text depends on the call (filters, patch fields): prepared once per shape. */
  private statement(text: string): Statement {
    let stmt = this.dynamic.get(text);
    if (!stmt) {
      stmt = this.db.prepare(text);
      this.dynamic.set(text, stmt);
    }
    return stmt;
  }
}
