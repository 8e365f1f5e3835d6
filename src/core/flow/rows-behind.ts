import type { StepRecord } from '../../contract/checkpoint-store';
import { StepAbandoned } from '../run/execution';

/** Rows a run in `durability: 'async'` may have in flight at once before its next step waits for the oldest. */
export const ROWS_IN_FLIGHT = 8;

/**
 * The step rows of an 'async' execution that are still being written while later steps run. The append
 * queue writes them in order and, once one fails, writes none after it, so "the newest row landed" means
 * every row before it landed too. Whatever must not run ahead of the record (a side effect's intent row,
 * a durable call, a wait, a sleep, a child run, a pause, the run's end) first awaits `durable()`; a new step
 * starts only when fewer than `limit` rows are in flight, and not at all once a write failed: the first
 * failure is what the run fails with, as it would have in 'sync' mode at that step's append.
 */
export class RowsBehind {
  private readonly inFlight = new Set<Promise<void>>();
  private failure: { error: unknown } | null = null;

  constructor(readonly limit: number = ROWS_IN_FLIGHT) {}

  /** Rows written but not yet acknowledged by the store. */
  get size(): number {
    return this.inFlight.size;
  }

  /** True when a new step must wait for the oldest row first. */
  get full(): boolean {
    return this.inFlight.size >= this.limit;
  }

  /**
   * Tracks one row's write; `landed` runs once it is committed (reporting, bookkeeping). A failure is
   * kept, never left unhandled: `check`, `room` and `durable` throw it.
   */
  add(written: Promise<StepRecord>, landed: (record: StepRecord) => void): void {
    const tracked: Promise<void> = written.then(landed, (error: unknown) => {
      this.failure ??= { error };
    });
    this.inFlight.add(tracked);
    void tracked.then(() => this.inFlight.delete(tracked));
  }

  /** Throws the first failed write's error, if any. */
  check(): void {
    if (this.failure) throw this.failure.error;
  }

  /** Waits until fewer than `limit` rows are in flight (the oldest lands first: rows are written in order). */
  async room(): Promise<void> {
    while (this.inFlight.size >= this.limit) await Promise.race(this.inFlight);
    this.check();
  }

  /**
   * Resolves once every row handed over so far is committed. After a failed write it rejects with a
   * `StepAbandoned` (the waiting step is neither retried nor recorded as a failed attempt: nothing more is
   * written), and the run ends with the write's own error (`settle`).
   */
  durable(): Promise<void> {
    if (this.inFlight.size === 0) return this.failure ? Promise.reject(this.lost()) : Promise.resolve();
    return this.allLanded();
  }

  private async allLanded(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all(this.inFlight);
    if (this.failure) throw this.lost();
  }

  private lost(): StepAbandoned {
    return new StepAbandoned('an earlier row of the run could not be written, so this step stops before its effect');
  }

  /**
   * The error a run that stopped with `error` ends with, once every row in flight settled: the first failed
   * write when there was one (in 'sync' mode the run would have failed there, before the later step ran),
   * else `error` itself.
   */
  async settle(error: unknown): Promise<unknown> {
    while (this.inFlight.size > 0) await Promise.all(this.inFlight);
    return this.failure ? this.failure.error : error;
  }
}
