import { CheckpointCorruptedError, RunNotFoundError, WaypointError } from '../contract/errors';
import type { CheckpointStore, PayloadRewrite, PayloadSwap, RunFilter } from '../contract/checkpoint-store';
import { PayloadOpenError, type PayloadCipher } from './payload-cipher';
import { type PayloadSlot, slotBinding, slotSequence } from './payload-codec';

/** What re-encrypting one run did (`EncryptingCheckpointStore.reencryptRun`). */
export interface ReencryptReport {
  runId: string;
  /** Values now sealed under the active key that were not (sealed under an older key, or clear text). */
  rewritten: number;
  /** Values already sealed under the active key, left as they were. */
  alreadyCurrent: number;
  /** Values changed by someone else between the read and the rewrite, left to them; run it again to cover them. */
  skipped: number;
}

export interface ReencryptOptions {
  /** Step rows read and rewritten per store call (default 500), so a long run never sits in memory whole. */
  chunkSize?: number;
}

export interface ReencryptAllOptions extends ReencryptOptions {
  /** Only these runs (default: every run). */
  filter?: RunFilter;
  /** Called after each run, with its report or the error naming its first value that could not be opened. */
  onRun?: (runId: string, outcome: ReencryptReport | CheckpointCorruptedError) => void;
}

/** What `reencryptAll` did. */
export interface ReencryptAllReport {
  /** Runs read to the end, in listing order. */
  runs: ReencryptReport[];
  /** Runs holding a value that could not be opened (their other values were re-encrypted). */
  unreadable: CheckpointCorruptedError[];
}

const DEFAULT_CHUNK = 500;

/**
 * Rewrites a run's sealed payloads under the active key, through the inner store's compare-and-swap
 * `rewritePayloads`, so a value written meanwhile by a live executor, a compaction or a finishing
 * operation is never overwritten (it is counted as skipped). Every value is opened first, with the
 * additional authenticated data it was sealed with, and sealed again with that same data: a value that
 * does not open (its key is not configured, or its bytes were altered) is never rewritten. The rest of the
 * run is still re-encrypted, then `CheckpointCorruptedError` names the first such value.
 *
 * The digest of a step row is over its plaintext (`stepDigest` runs before the wrapper seals the row), so
 * re-encryption leaves it valid.
 *
 * @example
 * const report = await new Reencryptor(inner, cipher).run('q3-aapl');
 * // { runId: 'q3-aapl', rewritten: 14, alreadyCurrent: 0, skipped: 0 }
 */
export class Reencryptor {
  constructor(
    private readonly store: CheckpointStore,
    private readonly cipher: PayloadCipher,
  ) {}

  /** Re-encrypts one run; throws `RunNotFoundError` when there is none, `CheckpointCorruptedError` as above. */
  async run(runId: string, options: ReencryptOptions = {}): Promise<ReencryptReport> {
    const chunk = options.chunkSize ?? DEFAULT_CHUNK;
    if (!Number.isInteger(chunk) || chunk < 1) throw new WaypointError('INVALID_OPTIONS', `reencrypt: chunkSize must be a whole number >= 1 (got ${chunk}).`);
    const run = await this.store.getRun(runId);
    if (!run) throw new RunNotFoundError(runId);
    const pass = new RunPass(runId, this.cipher);

    const head: PayloadRewrite = { input: pass.plan(run.input, { runId, field: 'input' }, 'the run input') };
    if (run.error !== null) head.error = pass.plan(run.error, { runId, field: 'error' }, 'the run error');
    head.operations = (await this.store.listOperations(runId)).map(({ operationKey, result, error }) => ({
      operationKey,
      result: result === null ? undefined : pass.plan(result, { runId, operationKey, field: 'result' }, `the result of operation '${operationKey}'`),
      error: error === null ? undefined : pass.plan(error, { runId, operationKey, field: 'error' }, `the error of operation '${operationKey}'`),
    }));
    await pass.apply(this.store, head);

    // Up to the last sequence as read above: steps appended later are sealed by their writer.
    for (let from = 1; from <= run.lastSequence; from += chunk) {
      const steps = await this.store.listSteps(runId, { fromSequence: from, toSequence: Math.min(from + chunk - 1, run.lastSequence) });
      const rewrite: PayloadRewrite = {
        steps: steps.map(({ sequence, output, memory }) => ({
          sequence,
          output: pass.plan(output, { runId, sequence, field: 'output' }, 'the output'),
          memory: memory === null ? undefined : pass.plan(memory, { runId, sequence, field: 'memory' }, 'the memory'),
        })),
      };
      await pass.apply(this.store, rewrite);
    }
    if (pass.unreadable) throw pass.unreadable;
    return pass.report;
  }

  /**
   * Re-encrypts every listed run, one after another. A run holding a value that cannot be opened is
   * reported in `unreadable` and the others go on; any other error (the store is down) ends the call.
   */
  async all(options: ReencryptAllOptions = {}): Promise<ReencryptAllReport> {
    const ids = (await this.store.listRuns(options.filter)).map((run) => run.runId);
    const out: ReencryptAllReport = { runs: [], unreadable: [] };
    for (const runId of ids) {
      let outcome: ReencryptReport | CheckpointCorruptedError;
      try {
        outcome = await this.run(runId, options);
        out.runs.push(outcome);
      } catch (error) {
        if (error instanceof RunNotFoundError) continue; // deleted since it was listed
        if (!(error instanceof CheckpointCorruptedError)) throw error;
        outcome = error;
        out.unreadable.push(error);
      }
      options.onRun?.(runId, outcome);
    }
    return out;
  }
}

/** The counts of one run, and the swaps it plans. */
class RunPass {
  readonly report: ReencryptReport;
  unreadable: CheckpointCorruptedError | undefined;

  constructor(
    private readonly runId: string,
    private readonly cipher: PayloadCipher,
  ) {
    this.report = { runId, rewritten: 0, alreadyCurrent: 0, skipped: 0 };
  }

  /** The swap that seals `text` under the active key, bound to the same slot, or undefined when none is needed or possible. */
  plan(text: string, slot: PayloadSlot, what: string): PayloadSwap | undefined {
    const aad = slotBinding(slot);
    let plain: string;
    try {
      plain = this.cipher.openText(text, aad);
    } catch (error) {
      if (!(error instanceof PayloadOpenError)) throw error;
      this.unreadable ??= new CheckpointCorruptedError(this.runId, slotSequence(slot), `${what} cannot be re-encrypted: ${error.message}`);
      return undefined;
    }
    if (this.cipher.keyIdOf(text) === this.cipher.activeKeyId) {
      this.report.alreadyCurrent += 1;
      return undefined;
    }
    return { from: text, to: this.cipher.sealText(plain, aad) };
  }

  async apply(store: CheckpointStore, rewrite: PayloadRewrite): Promise<void> {
    const trimmed: PayloadRewrite = {
      input: rewrite.input,
      error: rewrite.error,
      steps: rewrite.steps?.filter((s) => s.output || s.memory),
      operations: rewrite.operations?.filter((o) => o.result || o.error),
    };
    if (!trimmed.input && !trimmed.error && !trimmed.steps?.length && !trimmed.operations?.length) return;
    const outcome = await store.rewritePayloads(this.runId, trimmed);
    this.report.rewritten += outcome.rewritten;
    this.report.skipped += outcome.skipped;
  }
}
