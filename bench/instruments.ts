import { Client } from 'pg';
import type { CheckpointStore } from '../src/index';

/**
 * Counters the bench puts around the runtime without changing it: store calls (a proxy around the
 * CheckpointStore bound in the container) and SQL statements actually sent to PostgreSQL (every `pg`
 * client's `query`, which is what the store's pool runs underneath; pg_stat_statements is not loaded on
 * the shared server, and loading it needs a restart).
 */

/** Calls per store method, with a hook when a call's promise settles. */
export class CallCounter {
  private counts = new Map<string, number>();
  /** Called after a counted call resolved (method name); the resume figure stops its clock here. */
  onResolved: ((method: string) => void) | null = null;

  hit(method: string): void {
    this.counts.set(method, (this.counts.get(method) ?? 0) + 1);
  }

  snapshot(): Record<string, number> {
    return Object.fromEntries(this.counts);
  }

  reset(): void {
    this.counts.clear();
  }
}

/** Counts of `after` minus `before`, dropping zeros. */
export function diffCounts(after: Record<string, number>, before: Record<string, number> = {}): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) !== 0) out[k] = v - (before[k] ?? 0);
  return out;
}

/** Sum of all counts: `totalOf({ appendStep: 1, getRun: 1 })` → 2. */
export function totalOf(counts: Record<string, number>): number {
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

/**
 * Wraps a store so every method call is counted. The wrappers are built once per method (not per call)
 * so the proxy adds well under a microsecond per call; `dataSource`, `backend` and other properties pass
 * through untouched.
 *
 * @example
 * const counter = new CallCounter();
 * container.bind(TOKENS.CheckpointStore).toConstantValue(countingStore(new MemoryCheckpointStore(), counter));
 */
export function countingStore<T extends CheckpointStore>(inner: T, counter: CallCounter): T {
  const wrappers = new Map<string, (...args: unknown[]) => unknown>();
  return new Proxy(inner, {
    get(target, property) {
      const value = Reflect.get(target, property, target) as unknown;
      if (typeof value !== 'function' || typeof property !== 'string' || property === 'constructor') return value;
      let wrapper = wrappers.get(property);
      if (!wrapper) {
        const method = value as (...args: unknown[]) => unknown;
        wrapper = (...args: unknown[]) => {
          counter.hit(property);
          const result = method.apply(target, args);
          if (counter.onResolved && result instanceof Promise) {
            return (result as Promise<unknown>).then((v) => (counter.onResolved?.(property), v));
          }
          return result;
        };
        wrappers.set(property, wrapper);
      }
      return wrapper;
    },
  });
}

/**
 * Counts statements sent by every `pg` client of this process while `active` (the floor's clients are
 * idle then). Installed once by patching `Client.prototype.query`, which `Pool#query` and TypeORM's
 * query runners both end in.
 */
export class PgStatementCounter {
  private static installed: PgStatementCounter | null = null;
  active = false;
  total = 0;
  /** Statements by a short label of their SQL (first words), for the breakdown in `--json`. */
  readonly byLabel = new Map<string, number>();

  static install(): PgStatementCounter {
    if (PgStatementCounter.installed) return PgStatementCounter.installed;
    const counter = new PgStatementCounter();
    const prototype = Client.prototype as unknown as { query: (this: Client, ...args: unknown[]) => unknown };
    const original = prototype.query;
    prototype.query = function (this: Client, ...args: unknown[]) {
      if (counter.active) counter.record(args[0]);
      return original.apply(this, args);
    };
    PgStatementCounter.installed = counter;
    return counter;
  }

  reset(): void {
    this.total = 0;
    this.byLabel.clear();
  }

  private record(query: unknown): void {
    this.total += 1;
    const text = typeof query === 'string' ? query : ((query as { text?: string } | null)?.text ?? '?');
    const label = text.replace(/\s+/g, ' ').trim().slice(0, 60);
    this.byLabel.set(label, (this.byLabel.get(label) ?? 0) + 1);
  }
}
