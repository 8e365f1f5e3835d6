import { createHash } from 'node:crypto';
import type { Pool, QueryResult } from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import { LeaseLostError } from '../../contract/errors';
import {
  FINAL_STATUSES,
  type Fence,
  type LeaseGrant,
  type LoadedRun,
  type NewOperation,
  type NewRun,
  type OperationRecord,
  type OperationCondition,
  type OperationWrite,
  type PayloadRewrite,
  type PayloadSwap,
  type RewriteOutcome,
  type RunFilter,
  type RunPatch,
  type RunRecord,
  type StepAppend,
  type StepRecord,
  type StepsChange,
  type StoreTransaction,
  swapCount,
} from '../../contract/checkpoint-store';
import { type BatchResults, CommitBatcher, type GroupCommitStats, type ResolvedGroupCommit } from './group-commit';
import { AppendConnections } from './append-connections';
import type { DialectOps } from './ops';
import type { PostgresDataSource } from './postgres-data-source';
import { PostgresStreams } from './postgres-stream';
import { PostgresTransaction, isServerError, rejectDuplicate } from './postgres-transaction';
import { PG_ENCODING, type Row, pgAppendArrays, pgAppendValues, stepRow, toDate, toOperation, toRun, toStep } from './rows';
import { MAX_SEQUENCE, RUN_COLUMNS, RUN_PATCH_COLUMNS, type RunPatchField, STEP_COLUMNS, type Tables } from './sql';
import { pgListRuns, pgRewriteStatements, pgStatements, pgTransactionStatements, type PgTransactionStatements, pgUpdateRun } from './sql-postgres';

const PATCH_FIELDS = Object.keys(RUN_PATCH_COLUMNS) as RunPatchField[];
const STEP_PAYLOAD_COLUMNS = STEP_COLUMNS.slice(2);

/**
 * The PostgreSQL data methods, on the store's `pg` Pool (the one TypeORM's DataSource adopts when it is
 * loaded: postgres-data-source.ts): no entity metadata, query builder or reflection per call. Every statement is a named prepared statement,
 * parsed and planned once per pooled connection.
 */
export class PostgresOps implements DialectOps {
  /** The store's pool (postgres-data-source.ts), for the tiered store's own statements too. */
  readonly pool: Pool;
  private readonly sql: PgTransactionStatements;
  private readonly names = new Map<string, string>();
  private readonly batcher: CommitBatcher<StepAppend> | null;
  /** The connections appends run on: kept checked out between appends (see AppendConnections). */
  private readonly appends: AppendConnections;
  /** The run-stream methods, with the store's one listening connection. */
  readonly streams: PostgresStreams;
  /** Built on first use: only re-encryption needs them. */
  private rewriteSql: ReturnType<typeof pgRewriteStatements> | undefined;

  constructor(
    private readonly source: PostgresDataSource,
    private readonly tables: Tables,
    groupCommit: ResolvedGroupCommit | null = null,
    poolSize = 10,
  ) {
    this.pool = source.pool;
    // One per batch in flight (one without group commit), and never the pool's last connection.
    this.appends = new AppendConnections(this.pool, Math.min(groupCommit?.maxInFlight ?? 1, poolSize - 1));
    this.sql = { ...pgStatements(tables), ...pgTransactionStatements(tables) };
    this.streams = new PostgresStreams(this.pool, tables);
    this.batcher =
      groupCommit &&
      new CommitBatcher(
        (a) => a.step.runId,
        (batch) => this.appendBatch(batch),
        groupCommit,
      );
  }

  async createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    const res = await this.query(this.sql.createRun, [run.runId, run.pipelineName, run.pipelineVersion, run.input, run.metadata, run.parentRunId ?? null]);
    if (res.rows[0]) return { run: toRun(res.rows[0]), created: res.rows[0].created === true };
    // A concurrent insert won after this statement's snapshot was taken: read its committed row.
    const existing = await this.getRun(run.runId);
    // plain Error: an internal invariant (the upsert returns a row), wrapped as STORE_UNAVAILABLE if it ever breaks.
    if (!existing) throw new Error(`run '${run.runId}' was neither inserted nor found`);
    return { run: existing, created: false };
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    const res = await this.query(this.sql.getRun, [runId]);
    return res.rows[0] ? toRun(res.rows[0]) : null;
  }

  async loadRun(runId: string): Promise<LoadedRun | null> {
    const { rows } = await this.query(this.sql.loadRun, [runId]);
    const first = rows[0];
    if (!first || first.sequence !== null) return null; // no run row (steps alone would be orphans)
    const run: Row = {};
    for (const column of RUN_COLUMNS) run[column] = first[`run_${column}`];
    const steps = new Array<StepRecord>(rows.length - 1);
    for (let i = 1; i < rows.length; i++) steps[i - 1] = toStep(rows[i]);
    return { run: toRun(run), steps };
  }

  async listRuns(filter: RunFilter = {}): Promise<RunRecord[]> {
    const { text, values } = pgListRuns(this.tables, filter);
    return (await this.query(text, values)).rows.map(toRun);
  }

  async listSteps(runId: string, range: { fromSequence?: number; toSequence?: number } = {}): Promise<StepRecord[]> {
    const from = Math.max(range.fromSequence ?? 1, -MAX_SEQUENCE);
    const to = Math.min(range.toSequence ?? MAX_SEQUENCE, MAX_SEQUENCE);
    return (await this.query(this.sql.listSteps, [runId, from, to])).rows.map(toStep);
  }

  /** Group commit counters, or null when it is off. */
  get groupCommitStats(): GroupCommitStats | null {
    return this.batcher?.stats ?? null;
  }

  appendStep(append: StepAppend): Promise<void> {
    return this.batcher ? this.batcher.submit(append) : this.appendOne(append);
  }

  async appendRun(appends: readonly StepAppend[]): Promise<void> {
    if (appends.length === 0) return;
    if (appends.length === 1) return this.appendStep(appends[0]);
    const first = appends[0];
    const res = await this.appendQuery(this.sql.appendRun, pgAppendArrays(appends)).catch(rejectDuplicate(first));
    if (res.rowCount === 0) throw new LeaseLostError(first.step.runId, first.fence.epoch, first.step.stepName);
  }

  /**
   * One append: the steady statement when the run stays running (no run-row transition to plan or open),
   * then, only when that wrote nothing, the full statement, which writes the transition or rejects.
   * `steadyTried`: a batch's steady statement already left this append out, so only the full one is sent.
   */
  private async appendOne(append: StepAppend, steadyTried = false): Promise<void> {
    const values = pgAppendValues(append);
    if (!steadyTried && append.run.status === 'running') {
      const steady = await this.appendQuery(this.sql.appendSteady, values).catch(rejectDuplicate(append));
      if (steady.rowCount === 1) return;
    }
    const res = await this.appendQuery(this.sql.appendStep, values).catch(rejectDuplicate(append));
    if (res.rowCount === 0) throw new LeaseLostError(append.step.runId, append.fence.epoch, append.step.stepName);
  }

  /**
   * One group-commit batch: a lone append takes the single-row statements; several share
   * `appendSteps`, and the appends it did not apply (a transition, a stale fence or sequence) go
   * alone to the full statement. When PostgreSQL rejects the batch statement (it reported an error, so nothing
   * of it committed), each append is retried alone so one bad append cannot fail the others. A
   * connection lost mid-statement leaves the outcome unknown, so every append of the batch gets that
   * error, as a lone append would.
   */
  private async appendBatch(batch: StepAppend[]): Promise<BatchResults> {
    if (batch.length === 1)
      return [
        await this.appendOne(batch[0]).then(
          () => null,
          (error: Error) => error,
        ),
      ];
    let applied: Set<number>;
    try {
      const res = await this.appendQuery(this.sql.appendSteps, pgAppendArrays(batch));
      applied = new Set(res.rows.map((row) => row.ord as number));
    } catch (error) {
      if (!isServerError(error)) throw error;
      return Promise.all(
        batch.map((append) =>
          this.appendOne(append).then(
            () => null,
            (e: Error) => e,
          ),
        ),
      );
    }
    return Promise.all(
      batch.map((append, i) =>
        applied.has(i + 1)
          ? Promise.resolve(null)
          : this.appendOne(append, true).then(
              () => null,
              (e: Error) => e,
            ),
      ),
    );
  }

  async updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    const fields = PATCH_FIELDS.filter((f) => patch[f] !== undefined);
    const values: unknown[] = [runId, ...fields.map((f) => patch[f])];
    if (fence) values.push(fence.epoch);
    const res = await this.query(pgUpdateRun(this.tables, fields, fence !== null), values);
    if (fence && res.rowCount === 0) throw new LeaseLostError(runId, fence.epoch);
  }

  async acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    const res = await this.query(this.sql.acquireLease, [runId, owner, Math.ceil(ttlMs), takeOverFrom ?? null]);
    const row = res.rows[0];
    return row ? { owner, epoch: row.lease_epoch as number, expiresAt: toDate(row.lease_expires_at) } : null;
  }

  async setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
    const res = await this.query(this.sql.setLeaseExpiry, [runId, owner, epoch, ttlMs === null ? null : Math.ceil(ttlMs)]);
    return (res.rowCount ?? 0) > 0;
  }

  async getOperation(operationKey: string): Promise<OperationRecord | null> {
    const res = await this.query(this.sql.getOperation, [operationKey]);
    return res.rows[0] ? toOperation(res.rows[0]) : null;
  }

  // Overrides the derived begin and finish: one round trip each, around every side effect.
  async beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    const res = await this.query(this.sql.beginOperation, [op.operationKey, op.runId, op.stepKey, op.name, fence.epoch]);
    const row = res.rows[0];
    if (row) {
      if (row.fenced !== true) throw new LeaseLostError(op.runId, fence.epoch);
      return toOperation(row);
    }
    // No row: either the fence failed on an operation never seen, or the record was committed by a
    // transaction newer than this statement's snapshot. Off the hot path: ask again.
    if (!(await this.fenceHolds(op.runId, fence.epoch))) throw new LeaseLostError(op.runId, fence.epoch);
    const existing = await this.getOperation(op.operationKey);
    // plain Error: an internal invariant (the upsert returns a row), wrapped as STORE_UNAVAILABLE if it ever breaks.
    if (!existing) throw new Error(`operation '${op.operationKey}' was neither recorded nor found`);
    return existing;
  }

  async finishOperation(
    operationKey: string,
    outcome: { state: 'committed'; result: string } | { state: 'failed'; error: string },
    fence: Fence & { runId: string },
  ): Promise<void> {
    const [text, payload] = outcome.state === 'committed' ? [this.sql.commitOperation, outcome.result] : [this.sql.failOperation, outcome.error];
    const res = await this.query(text, [operationKey, payload, fence.runId, fence.epoch]);
    if (res.rows[0]?.fenced !== true) throw new LeaseLostError(fence.runId, fence.epoch);
  }

  async listOperations(runId: string): Promise<OperationRecord[]> {
    return (await this.query(this.sql.listOperations, [runId])).rows.map(toOperation);
  }

  async writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
    const values: unknown[] = [record.operationKey, record.runId, record.stepKey, record.name, record.state, record.result, record.error, record.attempts];
    const fence = 'fence' in condition ? condition.fence : null;
    const res = await this.query(fence ? this.sql.upsertOperation : this.sql.insertOperation, fence ? [...values, fence.epoch] : values);
    const row = res.rows[0];
    if (fence && row && row.fenced !== true) throw new LeaseLostError(record.runId, fence.epoch);
    if (row) return toOperation(row);
    // No row: the fence failed on an operation never seen, or a transaction newer than this statement's
    // snapshot wrote the record (an insert race, or a commit). Off the hot path: ask again.
    if (fence && !(await this.fenceHolds(record.runId, fence.epoch))) throw new LeaseLostError(record.runId, fence.epoch);
    const existing = await this.getOperation(record.operationKey);
    // plain Error: an internal invariant (the upsert returns a row), wrapped as STORE_UNAVAILABLE if it ever breaks.
    if (!existing) throw new Error(`operation '${record.operationKey}' was neither recorded nor found`);
    return existing;
  }

  async cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    const row = (await this.query(this.sql.cancelRun, [runId, resumeHint])).rows[0];
    if (!row) return this.getRun(runId);
    const run = toRun(row);
    // Not cancelled yet read as non-terminal: a concurrent write ended the run after our snapshot. Re-read.
    if (row.cancelled !== true && !FINAL_STATUSES.has(run.status)) return this.getRun(runId);
    return run;
  }

  /** One transaction (see `pgMaintenanceStatements`): off the hot path, so a few statements are fine. */
  replaceSteps(runId: string, change: StepsChange): Promise<void> {
    return this.inTransaction(async (run) => {
      const lock = (await run(this.sql.lockRun, [runId])).rows[0];
      if (change.fence && lock?.lease_epoch !== change.fence.epoch) throw new LeaseLostError(runId, change.fence.epoch);
      if (!lock) return;
      if (change.onlyIfBefore !== undefined && (await run(this.sql.stepsBefore, [runId, change.onlyIfBefore])).rowCount === 0) return;
      const sequences = change.rows.map((row) => row.sequence);
      await run(this.sql.deleteStepRange, [runId, change.fromSequence, change.toSequence ?? MAX_SEQUENCE, sequences]);
      for (const step of change.rows) {
        const row = stepRow(step, PG_ENCODING);
        await run(this.sql.upsertStep, [runId, step.sequence, ...STEP_PAYLOAD_COLUMNS.map((column) => row[column])]);
      }
      if (change.cursor) await run(this.sql.rewindRun, [runId, change.cursor.cursorAgent, change.cursor.cursorStep]);
    });
  }

  async deleteRun(runId: string): Promise<void> {
    await this.query(this.sql.deleteRun, [runId]);
  }

  /**
   * The swaps in one transaction on a dedicated pooled connection: at most one set-based statement per
   * kind of field (see `pgRewriteStatements`), the run row first as every writer takes it.
   */
  async rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    const sql = (this.rewriteSql ??= pgRewriteStatements(this.tables));
    const statements: [string, unknown[]][] = [];
    if (rewrite.input) statements.push([sql.swapInput, [runId, rewrite.input.from, rewrite.input.to]]);
    if (rewrite.error) statements.push([sql.swapRunError, [runId, rewrite.error.from, rewrite.error.to]]);
    const swaps = <T>(text: string, items: readonly T[], key: (item: T) => unknown, pick: (item: T) => PayloadSwap | undefined) => {
      const chosen = items.filter((item) => pick(item) !== undefined);
      if (chosen.length > 0) statements.push([text, [runId, chosen.map(key), chosen.map((item) => pick(item)!.from), chosen.map((item) => pick(item)!.to)]]);
    };
    const steps = rewrite.steps ?? [];
    swaps(
      sql.swapStepOutputs,
      steps,
      (s) => s.sequence,
      (s) => s.output,
    );
    swaps(
      sql.swapStepMemories,
      steps,
      (s) => s.sequence,
      (s) => s.memory,
    );
    const operations = rewrite.operations ?? [];
    swaps(
      sql.swapOperationResults,
      operations,
      (o) => o.operationKey,
      (o) => o.result,
    );
    swaps(
      sql.swapOperationErrors,
      operations,
      (o) => o.operationKey,
      (o) => o.error,
    );
    if (statements.length === 0) return { rewritten: 0, skipped: 0 };

    return this.inTransaction(async (run) => {
      let rewritten = 0;
      for (const [text, values] of statements) rewritten += (await run(text, values)).rowCount ?? 0;
      return { rewritten, skipped: swapCount(rewrite) - rewritten };
    });
  }

  /** `work` in one transaction on a dedicated pooled connection, committed when it returns, rolled back when it throws. */
  private async inTransaction<T>(work: (run: (text: string, values: unknown[]) => Promise<QueryResult<Row>>) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await work((text, values) => client.query<Row>({ name: this.nameOf(text), text, values }));
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
      throw error;
    } finally {
      client.release(broken);
    }
  }

  /** The TypeORM DataSource on this pool: TypeORM is loaded on first use (see `PostgresDataSource`). */
  get dataSource(): DataSource {
    return this.source.get();
  }

  closeConnection(): Promise<void> {
    return this.source.close();
  }

  /** A step's transaction on a dedicated pooled connection (see `PostgresTransaction`). */
  beginTransaction(runId: string, fence: Fence): Promise<StoreTransaction<EntityManager>> {
    return PostgresTransaction.open(this.dataSource, this.sql, (client, text, values) => client.query<Row>({ name: this.nameOf(text), text, values }), runId, fence);
  }

  private async fenceHolds(runId: string, epoch: number): Promise<boolean> {
    const res = await this.query(this.sql.leaseEpoch, [runId]);
    return res.rows[0]?.lease_epoch === epoch;
  }

  /** Hands the connections kept for appends back to the pool: the store calls it before closing the pool. */
  releaseConnections(): void {
    this.appends.close();
  }

  /** A step append's statement, on a connection kept for appends. */
  private appendQuery(text: string, values: unknown[]): Promise<QueryResult<Row>> {
    return this.appends.query<Row>({ name: this.nameOf(text), text, values });
  }

  private query(text: string, values: unknown[]): Promise<QueryResult<Row>> {
    return this.pool.query<Row>({ name: this.nameOf(text), text, values });
  }

  /** A stable prepared-statement name per SQL text (pg refuses one name for two texts on a connection). */
  private nameOf(text: string): string {
    let name = this.names.get(text);
    if (!name) {
      name = `waypoint_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      this.names.set(text, name);
    }
    return name;
  }
}
