import type { CheckpointStore } from '../../contract/checkpoint-store';
import { WaypointError } from '../../contract/errors';

/** What a store call of an abandoned execution gets: the process it belonged to is gone. */
export function crashPointError(runId: string, point: string): WaypointError {
  return new WaypointError(
    'CRASH_POINT',
    `crashTest abandoned the execution of run '${runId}' at ${point}, as a process death would; nothing of it is written after this point, and a new Waypoint resumes the run.`,
    { runId },
  );
}

/** The life of one simulated process: once `kill`ed, its store refuses every call. */
export class ProcessLife {
  death: WaypointError | undefined;

  get dead(): boolean {
    return this.death !== undefined;
  }

  /** Ends the process (the first death stands) and returns the error its calls get from now on. */
  kill(error: WaypointError): WaypointError {
    this.death ??= error;
    return this.death;
  }
}

const PASS_THROUGH = new Set<PropertyKey>(['backend', 'location', 'constructor']);

/**
 * A view of `inner` for one simulated process: every method call (and every call on a transaction it
 * began) is refused once `life` is dead, as the database stops hearing from a killed process. `close`
 * closes `inner` only when `ownsInner` (a store opened for this process alone, not the kit's shared one).
 */
export function mortalStore(inner: CheckpointStore, life: ProcessLife, ownsInner: boolean): CheckpointStore {
  const wrap = <T extends object>(target: T): T =>
    new Proxy(target, {
      get(obj, prop, receiver) {
        const value: unknown = Reflect.get(obj, prop, receiver);
        if (typeof value !== 'function' || PASS_THROUGH.has(prop)) return value;
        if (prop === 'close') return ownsInner ? (value as () => unknown).bind(obj) : () => Promise.resolve();
        return (...args: unknown[]) => {
          if (life.death) return Promise.reject(life.death);
          const out: unknown = (value as (...a: unknown[]) => unknown).apply(obj, args);
          // A transaction begun before the death must not commit after it.
          if (prop === 'beginTransaction' && out instanceof Promise) return out.then((tx: object) => wrap(tx));
          return out;
        };
      },
    });
  return wrap(inner);
}
