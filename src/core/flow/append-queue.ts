import type { CheckpointStore, CursorUpdate, Fence, StepAppend, StepRecord } from '../../contract/checkpoint-store';

/** A step's open transaction: its row commits inside it. */
type StepTransaction = { commit(append: StepAppend): Promise<void> };

/** Builds a row at `sequence`, chained to the row whose link is `prev`, from `arg` (no closure per row needed). */
export type RowBuilder<A> = (sequence: number, prev: string, arg: A) => StepRecord;

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
    /**
     * 'async' durability: once a write failed, no later row is written (rows wait in the queue behind steps
     * that ran ahead of them, and a later row must never land after an earlier one was lost).
     */
    private readonly stopAfterFailure = false,
  ) {
    this.sequence = sequence;
    this.prev = prev;
  }

  /** Set (with stopAfterFailure) by the first failed write: every row appended after it is refused with it. */
  private failure: { error: unknown } | null = null;

  /**
   * Appends one row, built by `build(sequence, prev, arg)` once its place in the chain is known. Sequence
   * and chain are taken in order, one write at a time; rows that become ready while a write is in flight
   * leave together in the next one (`appendRun`: one statement and one commit on SQL), so twenty items
   * ending at once do not queue for twenty commits. Each row is fenced by the run's lease. A step with an
   * open transaction commits its row inside it, alone.
   */
  append<A>(build: RowBuilder<A>, arg: A, run: RowCursor, transaction?: StepTransaction): Promise<StepRecord> {
    if (this.failure) return Promise.reject(this.failure.error);
    if (!this.writing && !this.stopAfterFailure) return this.appendAlone(build, arg, run, transaction);
    const queued = new Promise<StepRecord>((resolve, reject) => {
      this.waiting.push({ build: build as RowBuilder<unknown>, arg, run, transaction, resolve, reject });
    });
    if (!this.writing) {
      // 'async': the first row waits for the steps that run on behind it in this turn of the event loop, so
      // they leave together (one commit, one fsync on SQLite, whose driver writes synchronously).
      this.writing = true;
      setImmediate(() => void this.drain());
    }
    return queued;
  }

  /**
   * Appends one row and runs `then`, whose own appends join it: they leave together in one write (behind a
   * write in flight, with it). 'sync' durability's step row and its merge row: one commit, no crash between
   * them. Resolves with the row once `then` settled too; rejects with the write's error, else with `then`'s.
   */
  async appendWith<A>(build: RowBuilder<A>, arg: A, run: RowCursor, then: () => Promise<void> | void): Promise<StepRecord> {
    const holding = !this.writing;
    this.writing = true; // appends wait in the queue until `then` returned
    let written: Promise<StepRecord>;
    let rest: Promise<void> | void;
    try {
      written = this.append(build, arg, run);
      try {
        rest = then();
      } catch (error) {
        rest = Promise.reject(error);
      }
    } finally {
      if (holding) this.afterWrite();
    }
    const [row, after] = await Promise.allSettled([written, rest]);
    if (row.status === 'rejected') throw row.reason;
    if (after.status === 'rejected') throw after.reason;
    return row.value;
  }

  /** True when no write is in flight: a row may leave at once through `startAlone`. */
  get idle(): boolean {
    return !this.writing;
  }

  /** The row the last `startAlone` wrote. */
  started: StepRecord | null = null;

  /**
   * The straight line's hot path: with nothing in flight, builds the row (then `started`), starts its write
   * and returns the store's promise itself, so a step's write makes no promise of the queue's own. The
   * caller awaits it and then calls `settleAlone` (with the row, or null when the write failed); rows that
   * became ready meanwhile wait in the queue until then. Throws what `build` or the store throws at once.
   */
  startAlone<A>(build: RowBuilder<A>, arg: A, run: RowCursor, transaction?: StepTransaction): Promise<void> {
    const step = build(this.sequence + 1, this.prev, arg);
    const append: StepAppend = { step, run, fence: this.fence };
    const written = transaction ? transaction.commit(append) : this.store.appendStep(append);
    this.writing = true;
    this.started = step;
    return written;
  }

  /** A `startAlone` write settled: `ok` when it was committed (the row is returned), not when it failed. */
  settleAlone(ok: boolean): StepRecord | null {
    const record = this.started;
    if (ok && record) {
      this.sequence = record.sequence;
      this.prev = record.sha256;
    }
    this.started = null;
    this.afterWrite();
    return ok ? record : null;
  }

  private appendAlone<A>(build: RowBuilder<A>, arg: A, run: RowCursor, transaction?: StepTransaction): Promise<StepRecord> {
    let written: Promise<void>;
    try {
      written = this.startAlone(build, arg, run, transaction);
    } catch (error) {
      return Promise.reject(error);
    }
    const step = this.started!;
    return written.then(
      () => {
        this.settleAlone(true);
        return step;
      },
      (error: unknown) => {
        if (this.stopAfterFailure) this.failure ??= { error };
        this.settleAlone(false);
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
        if (this.failure) {
          const error = this.failure.error;
          this.waiting.splice(0).forEach((pending) => pending.reject(error));
          break;
        }
        const batch = takeBatch(this.waiting);
        const appends: StepAppend[] = [];
        let sequence = this.sequence;
        let prev = this.prev;
        try {
          for (const pending of batch) {
            const record = pending.build(sequence + 1, prev, pending.arg);
            appends.push({ step: record, run: pending.run, fence: this.fence });
            sequence = record.sequence;
            prev = record.sha256;
          }
          const only = batch[0];
          if (only.transaction) await only.transaction.commit(appends[0]);
          else if (appends.length === 1) await this.store.appendStep(appends[0]);
          else await this.store.appendRun(appends);
        } catch (error) {
          if (this.stopAfterFailure) this.failure ??= { error };
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
  build: RowBuilder<unknown>;
  arg: unknown;
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
