import { CheckpointCorruptedError } from '../contract/errors';
import { PayloadCipher, PayloadOpenError, type EncryptionOptions } from './payload-cipher';
import { Reencryptor, type ReencryptAllOptions, type ReencryptAllReport, type ReencryptOptions, type ReencryptReport } from './reencryption';
import {
  CheckpointStore,
  type Fence,
  type LeaseGrant,
  type LoadedRun,
  supportsTransactions,
  type NewOperation,
  type NewRun,
  type OperationOutcome,
  type StoreTransaction,
  type OperationRecord,
  type OperationState,
  type PayloadRewrite,
  type RewriteOutcome,
  type RunFilter,
  type RunPatch,
  type RunRecord,
  type StepAppend,
  type StepRecord,
} from '../contract/checkpoint-store';

export type { EncryptionOptions } from './payload-cipher';
export type { ReencryptAllOptions, ReencryptAllReport, ReencryptOptions, ReencryptReport } from './reencryption';

/**
 * Encrypts payloads at rest (run input, step outputs and memories, operation results and errors) with
 * AES-256-GCM around any other store. Each ciphertext names its key id, so keys rotate by adding a new
 * active key while old rows stay readable with the old one, and is bound (as additional authenticated
 * data) to its run, sequence and field, so a ciphertext moved to another row fails to decrypt.
 * Identifiers, statuses and timestamps stay in clear text so runs can be listed and leased.
 *
 * Retiring a key: make the new key active (keeping the old one), then `reencryptRun` / `reencryptAll`
 * (or `waypoint-durable reencrypt`) rewrite what the old key sealed; once they report nothing unreadable, the old
 * key can go.
 *
 * @example
 * const waypoint = await Waypoint.create({ encryption: { activeKeyId: 'k2', keys: { k1: oldKey, k2: newKey } } });
 * await (waypoint.store as EncryptingCheckpointStore).reencryptAll(); // then drop k1 from the keys
 */
export class EncryptingCheckpointStore extends CheckpointStore {
  private readonly cipher: PayloadCipher;

  constructor(
    readonly inner: CheckpointStore,
    options: EncryptionOptions,
  ) {
    super();
    this.cipher = new PayloadCipher(options);
    // Offer transactions exactly when the wrapped store does, sealing what goes through them.
    if (supportsTransactions(inner)) {
      this.beginTransaction = async (runId: string, fence: Fence) => this.sealedTransaction(await inner.beginTransaction(runId, fence));
    }
  }

  override beginTransaction?: (runId: string, fence: Fence) => Promise<StoreTransaction>;

  override get location(): string | undefined {
    return this.inner.location;
  }

  private sealedTransaction(tx: StoreTransaction): StoreTransaction {
    return {
      manager: tx.manager,
      exclusive: tx.exclusive,
      getOperation: async (key) => {
        const op = await tx.getOperation(key);
        return op && this.openOp(op);
      },
      recordOperation: async (op, outcome) => {
        const k = op.operationKey;
        const sealed: OperationOutcome =
          outcome.state === 'committed'
            ? { state: 'committed', result: this.seal(outcome.result, `${k}:result`) }
            : { state: 'failed', error: this.seal(outcome.error, `${k}:error`) };
        return this.openOp(await tx.recordOperation(op, sealed));
      },
      savepoint: () => tx.savepoint(),
      releaseSavepoint: () => tx.releaseSavepoint(),
      rollbackToSavepoint: () => tx.rollbackToSavepoint(),
      appendStep: (append) => tx.appendStep({ ...append, step: this.sealStep(append.step) }),
      commit: () => tx.commit(),
      rollback: () => tx.rollback(),
    };
  }

  get backend(): string {
    return this.inner.backend;
  }

  /** The key id new payloads are sealed with. */
  get activeKeyId(): string {
    return this.cipher.activeKeyId;
  }

  init(): Promise<void> {
    return this.inner.init();
  }
  close(): Promise<void> {
    return this.inner.close();
  }

  async createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    const out = await this.inner.createRun({ ...run, input: this.seal(run.input, `${run.runId}:input`) });
    return { ...out, run: this.openRun(out.run) };
  }
  async getRun(runId: string): Promise<RunRecord | null> {
    const run = await this.inner.getRun(runId);
    return run && this.openRun(run);
  }
  override async loadRun(runId: string): Promise<LoadedRun | null> {
    const loaded = await this.inner.loadRun(runId);
    return loaded && { run: this.openRun(loaded.run), steps: loaded.steps.map((s) => this.openStep(s)) };
  }
  async listRuns(filter?: RunFilter): Promise<RunRecord[]> {
    return (await this.inner.listRuns(filter)).map((r) => this.openRun(r));
  }
  async listSteps(runId: string, range?: { fromSequence?: number; toSequence?: number }): Promise<StepRecord[]> {
    return (await this.inner.listSteps(runId, range)).map((s) => this.openStep(s));
  }
  appendStep(append: StepAppend): Promise<void> {
    return this.inner.appendStep({ ...append, step: this.sealStep(append.step) });
  }

  override appendRun(appends: readonly StepAppend[]): Promise<void> {
    return this.inner.appendRun(appends.map((append) => ({ ...append, step: this.sealStep(append.step) })));
  }
  updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    return this.inner.updateRun(runId, patch.error ? { ...patch, error: this.seal(patch.error, `${runId}:error`) } : patch, fence);
  }
  acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    return this.inner.acquireLease(runId, owner, ttlMs, takeOverFrom);
  }
  renewLease(runId: string, owner: string, epoch: number, ttlMs: number): Promise<boolean> {
    return this.inner.renewLease(runId, owner, epoch, ttlMs);
  }
  releaseLease(runId: string, owner: string, epoch: number): Promise<void> {
    return this.inner.releaseLease(runId, owner, epoch);
  }
  async getOperation(operationKey: string): Promise<OperationRecord | null> {
    const op = await this.inner.getOperation(operationKey);
    return op && this.openOp(op);
  }
  async beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    return this.openOp(await this.inner.beginOperation(op, fence));
  }
  finishOperation(operationKey: string, outcome: { state: 'committed'; result: string } | { state: 'failed'; error: string }, fence: Fence & { runId: string }): Promise<void> {
    const sealed =
      outcome.state === 'committed'
        ? { state: 'committed' as const, result: this.seal(outcome.result, `${operationKey}:result`) }
        : { state: 'failed' as const, error: this.seal(outcome.error, `${operationKey}:error`) };
    return this.inner.finishOperation(operationKey, sealed, fence);
  }
  async listOperations(runId: string): Promise<OperationRecord[]> {
    return (await this.inner.listOperations(runId)).map((o) => this.openOp(o));
  }
  async putOperation(op: NewOperation & { state: OperationState; result: string | null; error: string | null }): Promise<OperationRecord> {
    const k = op.operationKey;
    const stored = await this.inner.putOperation({
      ...op,
      result: op.result === null ? null : this.seal(op.result, `${k}:result`),
      error: op.error === null ? null : this.seal(op.error, `${k}:error`),
    });
    return this.openOp(stored);
  }
  override async cancelRun(runId: string, resumeHint: string): Promise<RunRecord | null> {
    const run = await this.inner.cancelRun(runId, resumeHint);
    return run && this.openRun(run);
  }
  compactSteps(runId: string, base: StepRecord): Promise<void> {
    return this.inner.compactSteps(runId, this.sealStep(base));
  }
  truncateSteps(runId: string, fromSequence: number, cursor: { cursorAgent: number; cursorStep: number }, fence: Fence): Promise<void> {
    return this.inner.truncateSteps(runId, fromSequence, cursor, fence);
  }
  deleteRun(runId: string): Promise<void> {
    return this.inner.deleteRun(runId);
  }

  /** Passed through untouched: the caller (`reencryptRun`) hands over values it has already sealed. */
  rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    return this.inner.rewritePayloads(runId, rewrite);
  }

  /**
   * Key rotation for one run: every payload not sealed under the active key (an older key's, or clear
   * text written before encryption was enabled) is opened and sealed again under the active key, bound to
   * the same record; a compare-and-swap, so a value changed meanwhile is left to its writer (`skipped`).
   * A value that cannot be opened is never rewritten: the rest of the run is, then
   * `CheckpointCorruptedError` names it. Throws `RunNotFoundError` for an unknown run.
   *
   * @example
   * const { rewritten, alreadyCurrent, skipped } = await store.reencryptRun('q3-aapl');
   */
  reencryptRun(runId: string, options?: ReencryptOptions): Promise<ReencryptReport> {
    return new Reencryptor(this.inner, this.cipher).run(runId, options);
  }

  /**
   * `reencryptRun` for every run (or those `filter` selects), one at a time; runs with a value that
   * cannot be opened are listed in `unreadable` and the others go on.
   *
   * @example
   * const { runs, unreadable } = await store.reencryptAll({ onRun: (runId) => console.log(runId) });
   * if (unreadable.length === 0) console.log('every run is sealed under', store.activeKeyId);
   */
  reencryptAll(options?: ReencryptAllOptions): Promise<ReencryptAllReport> {
    return new Reencryptor(this.inner, this.cipher).all(options);
  }

  private sealStep(step: StepRecord): StepRecord {
    const aad = `${step.runId}:${step.sequence}`;
    return { ...step, output: this.seal(step.output, `${aad}:output`), memory: step.memory === null ? null : this.seal(step.memory, `${aad}:memory`) };
  }
  private openStep(step: StepRecord): StepRecord {
    const aad = `${step.runId}:${step.sequence}`;
    const where = { runId: step.runId, sequence: step.sequence };
    return {
      ...step,
      output: this.open(step.output, `${aad}:output`, where),
      memory: step.memory === null ? null : this.open(step.memory, `${aad}:memory`, where),
    };
  }
  private openRun(run: RunRecord): RunRecord {
    const where = { runId: run.runId, sequence: 0 };
    return { ...run, input: this.open(run.input, `${run.runId}:input`, where), error: run.error === null ? null : this.open(run.error, `${run.runId}:error`, where) };
  }
  private openOp(op: OperationRecord): OperationRecord {
    const where = { runId: op.runId, sequence: 0 };
    return {
      ...op,
      result: op.result === null ? null : this.open(op.result, `${op.operationKey}:result`, where),
      error: op.error === null ? null : this.open(op.error, `${op.operationKey}:error`, where),
    };
  }

  private seal(plain: string, aad: string): string {
    return this.cipher.sealText(plain, aad);
  }

  /** Decrypts a sealed value; clear text written before encryption was enabled is returned as is. */
  private open(text: string, aad: string, where: { runId: string; sequence: number }): string {
    try {
      return this.cipher.openText(text, aad);
    } catch (error) {
      if (error instanceof PayloadOpenError) throw new CheckpointCorruptedError(where.runId, where.sequence, error.message);
      throw error;
    }
  }
}
