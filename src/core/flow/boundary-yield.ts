/**
 * When a run lets the event loop turn between two of its steps. A step whose store write is synchronous
 * (memory, better-sqlite3) never reaches the event loop by itself, so without a yield a due SIGTERM
 * handler, deadline timer or lease heartbeat would wait for the whole run. Turning the loop at every
 * boundary did that, but one turn (timers, an epoll_wait, the immediates) cost about as much node CPU
 * as the rest of a quick step. Turning it once `everyMs` have passed since the last turn delays a due
 * timer or signal handler by at most that long, and costs one turn per `everyMs` of steps.
 *
 * @example
 * const boundary = new BoundaryYield();
 * if (boundary.due()) await boundary.turn();
 */
export class BoundaryYield {
  private last: number;

  /** `now`: a monotonic clock in milliseconds (tests pass their own). */
  constructor(
    private readonly everyMs = BOUNDARY_YIELD_MS,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.last = now();
  }

  /** True when the loop has not been turned by this run for `everyMs` or more. */
  due(): boolean {
    return this.now() - this.last >= this.everyMs;
  }

  /** Lets one turn of the event loop run (timers, I/O, signal handlers, immediates queued before it). */
  turn(): Promise<void> {
    return new Promise((resolve) =>
      setImmediate(() => {
        this.last = this.now();
        resolve();
      }),
    );
  }
}

/** Node's timers have a 1 ms resolution: a due timer waits no longer than one more of its own ticks. */
export const BOUNDARY_YIELD_MS = 1;
