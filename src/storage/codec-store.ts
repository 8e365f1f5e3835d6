import {
  CheckpointStore,
  type Fence,
  type LeaseGrant,
  type LoadedRun,
  supportsTransactions,
  type NewOperation,
  type NewRun,
  type StoreTransaction,
  type OperationOutcome,
  type OperationRecord,
  type OperationCondition,
  type OperationWrite,
  type PayloadRewrite,
  type PayloadSwap,
  swapCount,
  type RewriteOutcome,
  type RunFilter,
  type RunPatch,
  type RunRecord,
  type StepAppend,
  type StepRecord,
  type StepsChange,
  type StoredStreamEvent,
  type StreamEvent,
  checkStreamAppend,
  supportsStreams,
} from '../contract/checkpoint-store';
import type { ArchiveBatch } from '../contract/archive-sink';
import { type CheckpointPayloadCodec, type PayloadSlot, mapEventPayload, mapOperationPayloads, mapOutcomePayload, mapRunPayloads, mapStepPayloads } from './payload-codec';

/**
 * Any store, with a `CheckpointPayloadCodec` on its payload path: every payload written is encoded and
 * every payload read is decoded, bound to its record (see `PayloadSlot`); everything else passes through.
 * This is the one place a codec is applied (encryption: `EncryptingCheckpointStore`), so backends only
 * ever move stored strings. The derived operations (`loadRun`, `appendRun`, `cancelRun`) are forwarded
 * to the inner store too, so its faster overrides (one round trip on SQL, one Lua script on Redis) stay in use.
 * It honours the whole contract in decoded terms and passes the conformance suite (test/storage/encrypting.test.ts).
 *
 * @example
 * const store = new CodecCheckpointStore(new MemoryCheckpointStore(), myCodec);
 */
export class CodecCheckpointStore extends CheckpointStore {
  constructor(
    readonly inner: CheckpointStore,
    private readonly codec: CheckpointPayloadCodec,
  ) {
    super();
    // Offer transactions exactly when the wrapped store does, encoding what goes through them.
    if (supportsTransactions(inner)) this.beginTransaction = async (runId, fence) => this.codedTransaction(await inner.beginTransaction(runId, fence));
    // Streams exactly when the wrapped store has them: a part's data is a payload like any other.
    if (supportsStreams(inner)) {
      this.appendEvents = async (runId, events, fence) => {
        checkStreamAppend(runId, events); // before encoding: a bad event is refused as the inner store would
        return inner.appendEvents(
          runId,
          events.map((e) => mapEventPayload(runId, e, this.encode)),
          fence,
        );
      };
      this.readEvents = async (runId, from, limit) => (await inner.readEvents(runId, from, limit)).map((e) => mapEventPayload(runId, e, this.decode));
      this.waitForEvents = (runId, from, signal) => inner.waitForEvents(runId, from, signal);
      this.streamLength = (runId) => inner.streamLength(runId);
      if (inner.dropStream) this.dropStream = (runId) => inner.dropStream!(runId);
    }
  }

  override beginTransaction?: (runId: string, fence: Fence) => Promise<StoreTransaction>;
  override appendEvents?: (runId: string, events: readonly StreamEvent[], fence?: Fence) => Promise<number>;
  override readEvents?: (runId: string, from: number, limit: number) => Promise<StoredStreamEvent[]>;
  override waitForEvents?: (runId: string, from: number, signal: AbortSignal) => Promise<boolean>;
  override streamLength?: (runId: string) => Promise<number>;
  override dropStream?: (runId: string) => Promise<number>;

  get backend(): string {
    return this.inner.backend;
  }
  override get location(): string | undefined {
    return this.inner.location;
  }

  init(): Promise<void> {
    return this.inner.init();
  }

  /**
   * Opens the payloads of records read from `inner` as stored (an archive batch: retention archives rows
   * sealed), as a read through this store would; a payload that does not open throws as it would there.
   *
   * @example
   * const opened = store.openArchived(await sink.read(entry));
   */
  openArchived(batch: ArchiveBatch): ArchiveBatch {
    return {
      ...batch,
      run: batch.run && this.openRun(batch.run),
      steps: batch.steps.map((s) => mapStepPayloads(s, this.decode)),
      operations: batch.operations?.map((o) => mapOperationPayloads(o, this.decode)),
    };
  }
  close(): Promise<void> {
    return this.inner.close();
  }

  async createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    const out = await this.inner.createRun(mapRunPayloads(run, this.encode));
    return { ...out, run: this.openRun(out.run) };
  }
  async getRun(runId: string): Promise<RunRecord | null> {
    return this.openRun(await this.inner.getRun(runId));
  }
  override async loadRun(runId: string): Promise<LoadedRun | null> {
    const loaded = await this.inner.loadRun(runId);
    return loaded && { run: this.openRun(loaded.run), steps: loaded.steps.map((s) => mapStepPayloads(s, this.decode)) };
  }
  async listRuns(filter?: RunFilter): Promise<RunRecord[]> {
    return (await this.inner.listRuns(filter)).map((r) => this.openRun(r));
  }
  async listSteps(runId: string, range?: { fromSequence?: number; toSequence?: number }): Promise<StepRecord[]> {
    return (await this.inner.listSteps(runId, range)).map((s) => mapStepPayloads(s, this.decode));
  }
  appendStep(append: StepAppend): Promise<void> {
    return this.inner.appendStep({ ...append, step: mapStepPayloads(append.step, this.encode) });
  }
  override appendRun(appends: readonly StepAppend[]): Promise<void> {
    return this.inner.appendRun(appends.map((append) => ({ ...append, step: mapStepPayloads(append.step, this.encode) })));
  }
  updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    const error = typeof patch.error === 'string' ? this.encode(patch.error, { runId, field: 'error' }) : patch.error;
    return this.inner.updateRun(runId, patch.error === undefined ? patch : { ...patch, error }, fence);
  }
  acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    return this.inner.acquireLease(runId, owner, ttlMs, takeOverFrom);
  }
  setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
    return this.inner.setLeaseExpiry(runId, owner, epoch, ttlMs);
  }
  async getOperation(operationKey: string): Promise<OperationRecord | null> {
    return this.openOp(await this.inner.getOperation(operationKey));
  }
  // Overrides the derived begin and finish, so the inner store's own (one round trip) are kept.
  override async beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    return mapOperationPayloads(await this.inner.beginOperation(op, fence), this.decode);
  }
  override finishOperation(operationKey: string, outcome: OperationOutcome, fence: Fence & { runId: string }): Promise<void> {
    return this.inner.finishOperation(operationKey, mapOutcomePayload(fence.runId, operationKey, outcome, this.encode), fence);
  }
  async listOperations(runId: string): Promise<OperationRecord[]> {
    return (await this.inner.listOperations(runId)).map((o) => mapOperationPayloads(o, this.decode));
  }
  async writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
    return mapOperationPayloads(await this.inner.writeOperation(mapOperationPayloads(record, this.encode), condition), this.decode);
  }
  override async cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    return this.openRun(await this.inner.cancelRun(runId, resumeHint));
  }
  replaceSteps(runId: string, change: StepsChange): Promise<void> {
    return this.inner.replaceSteps(runId, { ...change, rows: change.rows.map((row) => mapStepPayloads(row, this.encode)) });
  }
  deleteRun(runId: string): Promise<void> {
    return this.inner.deleteRun(runId);
  }

  /**
   * The contract's compare-and-swap, in decoded terms: a swap applies where the stored value decodes to
   * `from`, and writes `to` encoded for its slot. Each is handed to the inner store as a swap of the
   * stored value read here, so the inner compare-and-swap still refuses anything written after this
   * read. A value that does not decode (or differs, or is gone) is skipped.
   */
  override async rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    let skipped = 0;
    const plan = (stored: string | null | undefined, change: PayloadSwap | undefined, slot: PayloadSlot): PayloadSwap | undefined => {
      if (!change) return undefined;
      if (typeof stored === 'string' && this.decodesTo(stored, slot, change.from)) return { from: stored, to: this.codec.encode(change.to, slot) };
      skipped += 1;
      return undefined;
    };
    const run = await this.inner.getRun(runId);
    const stored: PayloadRewrite = { input: plan(run?.input, rewrite.input, { runId, field: 'input' }), error: plan(run?.error, rewrite.error, { runId, field: 'error' }) };
    const wanted = (rewrite.steps ?? []).map((s) => s.sequence);
    if (wanted.length > 0) {
      const rows = new Map((await this.inner.listSteps(runId, { fromSequence: Math.min(...wanted), toSequence: Math.max(...wanted) })).map((row) => [row.sequence, row]));
      stored.steps = (rewrite.steps ?? []).map(({ sequence, output, memory }) => ({
        sequence,
        output: plan(rows.get(sequence)?.output, output, { runId, sequence, field: 'output' }),
        memory: plan(rows.get(sequence)?.memory, memory, { runId, sequence, field: 'memory' }),
      }));
    }
    stored.operations = [];
    for (const { operationKey, result, error } of rewrite.operations ?? []) {
      const op = await this.inner.getOperation(operationKey);
      const own = op?.runId === runId ? op : null;
      stored.operations.push({
        operationKey,
        result: plan(own?.result, result, { runId, operationKey, field: 'result' }),
        error: plan(own?.error, error, { runId, operationKey, field: 'error' }),
      });
    }
    stored.steps = stored.steps?.filter((s) => s.output || s.memory);
    stored.operations = stored.operations.filter((o) => o.result || o.error);
    if (swapCount(stored) === 0) return { rewritten: 0, skipped };
    const outcome = await this.inner.rewritePayloads(runId, stored);
    return { rewritten: outcome.rewritten, skipped: outcome.skipped + skipped };
  }

  private decodesTo(stored: string, slot: PayloadSlot, expected: string): boolean {
    try {
      return this.codec.decode(stored, slot) === expected;
    } catch {
      return false; // a value that cannot be decoded is not the one the caller read
    }
  }

  private readonly encode = (text: string, slot: PayloadSlot): string => this.codec.encode(text, slot);
  private readonly decode = (text: string, slot: PayloadSlot): string => this.codec.decode(text, slot);

  private openRun<R extends RunRecord | null>(run: R): R {
    return run && mapRunPayloads(run, this.decode);
  }
  private openOp(op: OperationRecord | null): OperationRecord | null {
    return op && mapOperationPayloads(op, this.decode);
  }

  private codedTransaction(tx: StoreTransaction): StoreTransaction {
    return {
      manager: tx.manager,
      exclusive: tx.exclusive,
      getOperation: async (key) => this.openOp(await tx.getOperation(key)),
      recordOperation: async (op, outcome) => mapOperationPayloads(await tx.recordOperation(op, mapOutcomePayload(op.runId, op.operationKey, outcome, this.encode)), this.decode),
      savepoint: () => tx.savepoint(),
      releaseSavepoint: () => tx.releaseSavepoint(),
      rollbackToSavepoint: () => tx.rollbackToSavepoint(),
      appendStep: (append) => tx.appendStep({ ...append, step: mapStepPayloads(append.step, this.encode) }),
      commit: () => tx.commit(),
      rollback: () => tx.rollback(),
    };
  }
}
