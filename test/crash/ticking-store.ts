import type { CheckpointStore, StoreTransaction } from '../../src/index';

/**
 * Counts the interesting points a worker passes (every store call and transaction call, before and
 * after, plus the points the effects report) and kills the process with SIGKILL at the Nth. Which point
 * is the Nth is a pure function of the stored state the process starts from, so a seeded N reproduces
 * the same kill. Calls made on timers (lease renewal, release) are not counted: their number depends on
 * timing.
 *
 * @example
 * const ticker = new Ticker(37, journal);          // dies at the 37th point
 * const store = tickingStore(new TypeOrmCheckpointStore(...), ticker.tick);
 */
export class Ticker {
  /** Points passed so far. */
  count = 0;

  constructor(
    private readonly killAt: number,
    private readonly onKill: (tick: number, label: string) => void = () => {},
  ) {}

  readonly tick = (label: string): void => {
    this.count += 1;
    if (this.count !== this.killAt) return;
    this.onKill(this.count, label);
    process.kill(process.pid, 'SIGKILL');
  };
}

const UNCOUNTED = new Set<PropertyKey>(['constructor', 'init', 'close', 'renewLease', 'releaseLease', 'setLeaseExpiry']);

/** `store`, with a tick before and after every call (transactions it opens included). */
export function tickingStore(store: CheckpointStore, tick: (label: string) => void): CheckpointStore {
  return counting(store, 'store', tick, (method, value) => (method === 'beginTransaction' ? counting(value as StoreTransaction, 'tx', tick) : value));
}

function counting<T extends object>(target: T, prefix: string, tick: (label: string) => void, wrap: (method: string, value: unknown) => unknown = (_m, v) => v): T {
  return new Proxy(target, {
    get(object, property) {
      const value = Reflect.get(object, property, object) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string' || UNCOUNTED.has(property)) return value;
      return async (...args: unknown[]) => {
        tick(`${prefix}:${property}:before`);
        const out = wrap(property, await (value as (...a: unknown[]) => Promise<unknown>).apply(object, args));
        tick(`${prefix}:${property}:after`);
        return out;
      };
    },
  });
}
