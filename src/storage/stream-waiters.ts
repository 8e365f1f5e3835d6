/**
 * Wakes the `waitForEvents` callers of one store: each waiter re-reads its run's stream length when
 * woken (by `notify` for its run, by the poll interval, or by its abort signal), so a lost or
 * coalesced wake-up costs at most one poll interval, never a hang. The backends differ only in what
 * calls `notify` (memory and SQLite: their own appends; PostgreSQL: its LISTEN connection).
 *
 * @example
 * const waiters = new StreamWaiters(2_000);
 * const ready = await waiters.wait(runId, from, signal, () => store.streamLength(runId));
 * waiters.notify(runId); // after an append to runId
 */
export class StreamWaiters {
  private readonly byRun = new Map<string, Set<() => void>>();

  /** `pollMs`: the longest a waiter sleeps without a notification before it reads again; null: never (memory). */
  constructor(private readonly pollMs: number | null) {}

  /** How many waiters are registered (for tests of the shared listener). */
  get size(): number {
    let n = 0;
    for (const set of this.byRun.values()) n += set.size;
    return n;
  }

  /** Runs with at least one waiter. */
  runs(): string[] {
    return [...this.byRun.keys()];
  }

  /**
   * Resolves true once `length()` is above `from`, false when `signal` aborts first. The waiter is
   * registered before each read, so a notification between the read and the sleep is not missed.
   */
  async wait(runId: string, from: number, signal: AbortSignal, length: () => Promise<number>): Promise<boolean> {
    for (;;) {
      if (signal.aborted) return false;
      const woken = this.sleep(runId, signal);
      try {
        if ((await length()) > from) return true;
        await woken.promise;
      } finally {
        woken.cancel();
      }
    }
  }

  /** Wakes every waiter of `runId`. */
  notify(runId: string): void {
    const set = this.byRun.get(runId);
    if (!set) return;
    for (const wake of [...set]) wake();
  }

  /** Wakes every waiter (a reconnected listener may have missed notifications). */
  notifyAll(): void {
    for (const runId of this.runs()) this.notify(runId);
  }

  private sleep(runId: string, signal: AbortSignal): { promise: Promise<void>; cancel: () => void } {
    let wake!: () => void;
    const promise = new Promise<void>((resolve) => (wake = resolve));
    const timer = this.pollMs === null ? null : setTimeout(wake, this.pollMs);
    const set = this.byRun.get(runId) ?? new Set<() => void>();
    this.byRun.set(runId, set);
    set.add(wake);
    signal.addEventListener('abort', wake, { once: true });
    const cancel = () => {
      if (timer) clearTimeout(timer);
      signal.removeEventListener('abort', wake);
      set.delete(wake);
      if (set.size === 0 && this.byRun.get(runId) === set) this.byRun.delete(runId);
      wake();
    };
    return { promise, cancel };
  }
}
