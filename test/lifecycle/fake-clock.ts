import { ContainerModule } from 'inversify';
import { MemoryCheckpointStore, TOKENS, type Clock, type Logger } from '../../src/index';

/**
 * A clock for tests: time moves only when the runtime sleeps on it (or the test calls `advance`), and
 * every sleep resolves at once and is recorded, so backoffs and durable sleeps cost no real time.
 *
 * @example
 * const clock = new FakeClock();
 * // ... run a step with retries ...
 * assert.deepEqual(clock.sleeps, [100, 300, 900]);
 */
export class FakeClock implements Clock {
  /** Every delay the runtime asked for, in order. */
  readonly sleeps: number[] = [];
  private at: number;

  constructor(start = Date.UTC(2030, 0, 1)) {
    this.at = start;
  }

  now(): Date {
    return new Date(this.at);
  }

  advance(ms: number): void {
    this.at += ms;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    // the abort reason, unchanged: the runtime tells a pause (a PauseRequest, not an Error) from a timeout by it
    if (signal?.aborted) return Promise.reject(signal.reason);
    this.sleeps.push(ms);
    this.at += ms;
    // Resolve on the next turn of the event loop, not synchronously: a loop of sleeps must not starve
    // timers and signal handlers, exactly as real sleeps would not.
    return new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * A fake clock whose sleeps wait until the test calls `release()` (or their signal aborts), so a test
 * can act while the runtime is inside a backoff.
 */
export class ManualClock extends FakeClock {
  private pending: { ms: number; resolve: () => void }[] = [];

  /** Sleeps currently waiting. */
  get waiting(): number {
    return this.pending.length;
  }

  override sleep(ms: number, signal?: AbortSignal): Promise<void> {
    // the abort reason, unchanged: the runtime tells a pause (a PauseRequest, not an Error) from a timeout by it
    if (signal?.aborted) return Promise.reject(signal.reason);
    this.sleeps.push(ms);
    return new Promise<void>((resolve, reject) => {
      const entry = { ms, resolve: () => (signal?.removeEventListener('abort', onAbort), resolve()) };
      const onAbort = () => {
        this.pending = this.pending.filter((p) => p !== entry);
        // the abort reason, unchanged: the runtime tells a pause (a PauseRequest, not an Error) from a timeout by it
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.push(entry);
    });
  }

  /** Ends every waiting sleep, moving time forward by the longest of them. */
  release(): void {
    const released = this.pending.splice(0);
    this.advance(Math.max(0, ...released.map((p) => p.ms)));
    released.forEach((p) => p.resolve());
  }
}

export const silentLogger: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** Memory store, the given clock and a silent logger, for `Waypoint.create({ modules: [...] })`. */
export function fakeTimeModule(clock: Clock, store = new MemoryCheckpointStore()): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
    bind(TOKENS.Clock).toConstantValue(clock);
    bind(TOKENS.Logger).toConstantValue(silentLogger);
  });
}

/** Resolves once `condition` holds, checking on every turn of the event loop (for at most `ms`). */
export async function until(condition: () => boolean, what: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

/**
 * Keeps the event loop alive until `promise` settles. A ManualClock sleep holds no timer and the lease
 * heartbeat's timer is unref'd, so without this node may decide there is nothing left to wait for.
 */
export async function keepAlive<T>(promise: Promise<T>): Promise<T> {
  const timer = setInterval(() => {}, 1_000);
  try {
    return await promise;
  } finally {
    clearInterval(timer);
  }
}
