import { NonRetryableError, SerializationError, SideEffectFailedError, StateMutationError, WaypointError } from '../../contract/errors';

/*
 * What one step attempt needs around the step method, besides the executor: whether its result is a
 * promise and a plain object of updates, whether a failure may be retried, and one abort listener per
 * stop signal for every attempt that waits on it.
 */

export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function';
}

export function checkOutput(value: unknown, runId: string, key: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  const kind = describeNonPlain(value);
  if (kind) {
    throw new SerializationError(`Step '${key}' of run '${runId}' returned ${kind}; a step returns a partial state object (or nothing). Nothing was recorded.`, '$', {
      runId,
      step: key,
    });
  }
  return value as Record<string, unknown>;
}

/** What a step returned when it is not a plain object of updates, or null when it is one. */
export function describeNonPlain(value: unknown): string | null {
  if (typeof value !== 'object') return typeof value === 'function' ? 'a function' : `a ${typeof value}`;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto === Object.prototype || proto === null) return null;
  if (Array.isArray(value)) return 'an array';
  for (const type of [Map, Set, Date, Promise, RegExp] as const) if (value instanceof type) return `a ${type.name}`;
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return 'binary data';
  return null;
}

/** V8's TypeErrors for a write to a frozen object (strict mode), as a step meets them in ctx.state's values. */
const FROZEN_WRITE = /^Cannot (assign to read only property|add property|delete property|define property|redefine property)|object is not extensible/;

/**
 * A failure as the run should record it: a change of `ctx.state` in place becomes `STATE_MUTATED` naming
 * the run and step (the proxy that caught it knows neither); so does a write to a frozen value, which is
 * what a push onto a list of the state is. Anything else is returned as it is.
 */
export function classifyFailure(error: unknown, runId: string, step: string): unknown {
  if (error instanceof StateMutationError) return error.runId ? error : new StateMutationError(error.what, { runId, step });
  if (error instanceof TypeError && FROZEN_WRITE.test(error.message)) return new StateMutationError(error.message, { runId, step, cause: error });
  return error;
}

export function isRetryable(error: unknown): boolean {
  if (error instanceof NonRetryableError) return false;
  if (error instanceof SideEffectFailedError && error.cause instanceof NonRetryableError) return false;
  if (error instanceof WaypointError) {
    return ![
      'UNSERIALIZABLE_VALUE',
      'INVALID_STATE',
      'STATE_MUTATED',
      'LEASE_LOST',
      'STORE_UNAVAILABLE',
      'STORE_REJECTED',
      'INVALID_SIGNAL_NAME',
      'SIDE_EFFECT_OUTSIDE_RUN',
      'TRANSACTIONS_UNSUPPORTED',
      'EFFECT_AFTER_TRANSACTION',
      'STREAM_LIMIT',
    ].includes(error.code);
  }
  return true;
}

/**
 * One 'abort' listener per stop signal (per run), however many steps start on it or run on it at once:
 * adding and removing an EventTarget listener for every step cost more than the rest of its bookkeeping.
 */
class StopRelay {
  readonly handlers = new Set<() => void>();
  constructor(signal: AbortSignal) {
    signal.addEventListener(
      'abort',
      () => {
        for (const handler of [...this.handlers]) handler();
        this.handlers.clear();
      },
      { once: true },
    );
  }
}

const relays = new WeakMap<AbortSignal, StopRelay>();

/** Calls `handler` once when `signal` aborts (it must not be aborted yet); returns what unregisters it. */
export function onAbort(signal: AbortSignal, handler: () => void): () => void {
  let relay = relays.get(signal);
  if (!relay) relays.set(signal, (relay = new StopRelay(signal)));
  const { handlers } = relay;
  handlers.add(handler);
  return () => handlers.delete(handler);
}
