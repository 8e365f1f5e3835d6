import type { Clock } from '../../contract/clock';

interface Timer {
  due: number;
  order: number;
  resolve: () => void;
}

/**
 * A clock the test drives: time moves only when the test advances it, or, with `skipSleeps`, at once by
 * what each sleep asks for. A day-long `ctx.sleep` then takes no wall time, and a lease's expiry is a
 * matter of `advance(ttl)`.
 *
 * @example
 * const clock = new TestClock({ skipSleeps: false });
 * const sleeping = clock.sleep(86_400_000);
 * await clock.advance(86_400_000); // `sleeping` resolves
 */
export class TestClock implements Clock {
  private nowMs: number;
  private timers: Timer[] = [];
  private order = 0;
  /** True: a sleep moves the clock forward by its length and resolves on the next turn of the event loop. */
  skipSleeps: boolean;

  constructor(options: { skipSleeps?: boolean; start?: Date } = {}) {
    this.skipSleeps = options.skipSleeps ?? true;
    this.nowMs = (options.start ?? new Date('2026-01-01T00:00:00.000Z')).getTime();
  }

  now(): Date {
    return new Date(this.nowMs);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    if (this.skipSleeps) {
      this.nowMs += Math.max(0, ms);
      return new Promise((resolve) => setImmediate(resolve));
    }
    return new Promise((resolve, reject) => {
      const timer: Timer = { due: this.nowMs + Math.max(0, ms), order: this.order++, resolve: () => resolve() };
      const onAbort = () => {
        this.timers = this.timers.filter((t) => t !== timer);
        reject(signal!.reason as Error);
      };
      timer.resolve = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.timers.push(timer);
    });
  }

  /** Sleeps waiting on this clock (not yet due). */
  get pending(): number {
    return this.timers.length;
  }

  /** When the earliest pending sleep is due (ms since the epoch), or undefined when none waits. */
  nextDue(): number | undefined {
    let due: number | undefined;
    for (const t of this.timers) if (due === undefined || t.due < due) due = t.due;
    return due;
  }

  /**
   * Moves time forward by `ms`, waking every sleep that falls due on the way in due order, each given a turn
   * of the event loop (so what it starts can sleep again within the same advance).
   */
  async advance(ms: number): Promise<void> {
    const target = this.nowMs + Math.max(0, ms);
    for (;;) {
      const next = this.earliest();
      if (next === undefined || next.due > target) break;
      this.timers = this.timers.filter((t) => t !== next);
      this.nowMs = Math.max(this.nowMs, next.due);
      next.resolve();
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.nowMs = target;
  }

  private earliest(): Timer | undefined {
    let best: Timer | undefined;
    for (const t of this.timers) if (!best || t.due < best.due || (t.due === best.due && t.order < best.order)) best = t;
    return best;
  }
}
