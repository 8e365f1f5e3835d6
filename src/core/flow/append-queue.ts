import type { CheckpointStore, CursorUpdate, Fence, StepAppend, StepRecord } from '../../contract/checkpoint-store';

/** A step's open transaction: its row commits inside it. */
type StepTransaction = { commit(append: StepAppend): Promise<void> };

/** The run row's update that travels with a row: the cursor after it, and `completed` when the row ends the run. */
export type RowCursor = CursorUpdate;

/**
 * The control-flow interpreter's writes: one run's rows, in sequence order and chained, one write at a
 * time; rows that become ready while a write is in flight leave together in the next one.
 */
export class AppendQueue {
  /** The last sequence and link written. */
  sequence: number;
  prev: string;

  constructor(
    private readonly store: CheckpointStore,
    private readonly fence: Fence,
    sequence: number,
    prev: string,
  ) {
    this.sequence = sequence;
    this.prev = prev;
  }

  /**
   * Appends one row. Sequence and chain are taken in order, one write at a time; rows that become ready
   * while a write is in flight leave together in the next one (`appendRun`: one statement and one commit
   * on SQL), so twenty items ending at once do not queue for twenty commits. Each row is fenced by the
   * run's lease. A step with an open transaction commits its row inside it, alone.
   */
  append(build: (sequence: number, prev: string) => StepRecord, run: RowCursor, transaction?: StepTransaction): Promise<StepRecord> {
    // The usual case on a straight line: nothing in flight, so the row leaves at once, with no queue entry.
    if (!this.writing) return this.appendAlone(build, run, transaction);
    return new Promise<StepRecord>((resolve, reject) => {
      this.waiting.push({ build, run, transaction, resolve, reject });
    });
  }

  private appendAlone(build: (sequence: number, prev: string) => StepRecord, run: RowCursor, transaction?: StepTransaction): Promise<StepRecord> {
    let step: StepRecord;
    let written: Promise<void>;
    try {
      step = build(this.sequence + 1, this.prev);
      const append: StepAppend = { step, run, fence: this.fence };
      written = transaction ? transaction.commit(append) : this.store.appendStep(append);
    } catch (error) {
      return Promise.reject(error);
    }
    this.writing = true;
    // The store's promise and one `then`: no async function of its own on a straight line's hot path.
    return written.then(
      () => {
        this.sequence = step.sequence;
        this.prev = step.sha256;
        this.afterWrite();
        return step;
      },
      (error: unknown) => {
        this.afterWrite();
        throw error;
      },
    );
  }

  /** A lone write ended: rows that became ready meanwhile leave now. */
  private afterWrite(): void {
    this.writing = false;
    if (this.waiting.length > 0) void this.drain();
  }

  private readonly waiting: PendingAppend[] = [];
  private writing = false;

  private async drain(): Promise<void> {
    this.writing = true;
    try {
      while (this.waiting.length > 0) {
        const batch = takeBatch(this.waiting);
        const appends: StepAppend[] = [];
        let sequence = this.sequence;
        let prev = this.prev;
        try {
          for (const pending of batch) {
            const record = pending.build(sequence + 1, prev);
            appends.push({ step: record, run: pending.run, fence: this.fence });
            sequence = record.sequence;
            prev = record.sha256;
          }
          const only = batch[0];
          if (only.transaction) await only.transaction.commit(appends[0]);
          else if (appends.length === 1) await this.store.appendStep(appends[0]);
          else await this.store.appendRun(appends);
        } catch (error) {
          batch.forEach((pending) => pending.reject(error));
          continue;
        }
        this.sequence = sequence;
        this.prev = prev;
        batch.forEach((pending, i) => pending.resolve(appends[i].step));
      }
    } finally {
      this.writing = false;
    }
  }
}

interface PendingAppend {
  build: (sequence: number, prev: string) => StepRecord;
  run: RowCursor;
  transaction?: StepTransaction;
  resolve: (record: StepRecord) => void;
  reject: (error: unknown) => void;
}

/** The rows that can leave together: a row committed in a step's transaction leaves alone. */
function takeBatch(waiting: PendingAppend[]): PendingAppend[] {
  if (waiting[0].transaction) return waiting.splice(0, 1);
  const end = waiting.findIndex((pending) => pending.transaction);
  return waiting.splice(0, end === -1 ? Math.min(waiting.length, 64) : Math.min(end, 64));
}
