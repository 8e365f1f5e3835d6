import { StateMutationError } from '../../contract/errors';
import { defineData } from './value-decoder';
import type { ReducerFn } from '../../decorators/metadata';

/*
 * The state of a running run, as steps see it: one frame per place of the pipeline's tree (the run's
 * root, a branch, an item). Values are frozen as they are merged, never copied; steps get a
 * read-only view. Validating the state and building it from the input is state-schema.ts.
 */

/**
 * The pipeline's shared state: an instance of its state class (or a plain object when it has none),
 * validated with class-validator and frozen, so a step can read it but never change it in place.
 */
export type SharedState = Readonly<Record<string, unknown>>;

const READ_ONLY: ProxyHandler<object> = {
  set(_target, key) {
    throw new StateMutationError(`it set '${String(key)}'`);
  },
  defineProperty(_target, key) {
    throw new StateMutationError(`it defined '${String(key)}'`);
  },
  deleteProperty(_target, key) {
    // An undefined property is not stored (as in JSON), so { key: undefined } would leave the key as it was.
    throw new StateMutationError(`it deleted '${String(key)}'; return { ${String(key)}: null } to clear it`);
  },
  setPrototypeOf() {
    throw new StateMutationError('it set the prototype');
  },
};

export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') defineData(target, key, value);
  else target[key] = value;
}

/**
 * The state as one place of a control-flow tree sees it: the state where it started plus its own
 * updates, with `@Reducer`s applied. `delta` holds what this frame changed (each reducer property
 * combined across updates), which is all a join or a forEach item merges back: never a whole view.
 */
export class StateFrame {
  private readonly target: Record<string, unknown>;
  /** What steps here get as `ctx.state`. */
  readonly view: SharedState;
  /**
   * This frame's own updates by property, in the order first set; null for the root frame of a run,
   * whose changes nothing merges (keeping them combined a reducer's list a second time at every step).
   */
  private readonly delta: Record<string, unknown> | null;

  /** `tracked`: keep this frame's own changes for `changes()` (a branch, an item); the root frame does not. */
  constructor(
    initial: SharedState,
    private readonly reducers: Readonly<Record<string, ReducerFn>>,
    tracked = true,
  ) {
    this.target = Object.create(Object.getPrototypeOf(initial) as object | null) as Record<string, unknown>;
    for (const key of Object.keys(initial)) setOwn(this.target, key, initial[key]);
    this.view = new Proxy(this.target, READ_ONLY) as SharedState;
    this.delta = tracked ? (Object.create(null) as Record<string, unknown>) : null;
    this.hasReducers = Object.keys(reducers).length > 0;
    this.reduced = !tracked && this.hasReducers ? (Object.create(null) as Record<string, unknown>) : null;
  }

  /** The root frame's reducer properties as they were before the last update that reached them (a merge row records the change). */
  private readonly reduced: Record<string, unknown> | null;

  /**
   * What reducer property `key` of the run's own frame held before the last update that reached it (its merge
   * row keeps only what the reducer added to that value); undefined on other frames.
   */
  reducedFrom(key: string): unknown {
    return this.reduced?.[key];
  }

  /** False for a pipeline without `@Reducer`s (most): no property needs looking up. */
  private readonly hasReducers: boolean;

  /** True for the run's own frame (not a parallel branch's or a forEach item's): what it holds is the run's state. */
  get root(): boolean {
    return this.delta === null;
  }

  /** A frame that starts from this one's current state (a branch, an item); it tracks its own changes. */
  fork(): StateFrame {
    return new StateFrame(this.target, this.reducers);
  }

  /** Merges an update (a private, decoded copy: frozen, not copied); a reducer property goes through its reducer. */
  apply(update: Record<string, unknown>): void {
    for (const key of Object.keys(update)) {
      const value = update[key];
      deepFreeze(value);
      const reducer = this.hasReducers && Object.prototype.hasOwnProperty.call(this.reducers, key) ? this.reducers[key] : undefined;
      const delta = this.delta;
      if (reducer) {
        const current = this.target[key];
        if (this.reduced) setOwn(this.reduced, key, current);
        const merged = reducer(current, value);
        freezeMerged(merged, current);
        setOwn(this.target, key, merged);
        if (delta) {
          const previous = delta[key];
          const combined = key in delta ? reducer(previous, value) : value;
          freezeMerged(combined, previous);
          setOwn(delta, key, combined);
        }
      } else {
        setOwn(this.target, key, value);
        if (delta) setOwn(delta, key, value);
      }
    }
  }

  /** The frame's changes as a plain object (for `state[into][i]` and a join); only a tracked frame has them. */
  changes(): Record<string, unknown> {
    // plain Error: an internal invariant (only a step frame is asked for its changes), never met by a user.
    if (!this.delta) throw new Error('StateFrame.changes(): the root frame of a run does not track its changes');
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(this.delta)) setOwn(out, key, this.delta[key]);
    return out;
  }
}

export function deepFreeze(value: unknown): void {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return;
  if (ArrayBuffer.isView(value)) return; // typed arrays cannot be frozen
  Object.freeze(value);
  // An array by index: Object.keys would make a string per item (a reducer's growing list, at every step).
  if (Array.isArray(value)) for (let i = 0; i < value.length; i++) deepFreeze(value[i]);
  else for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
}

/** Arrays a reducer returned that `freezeMerged` froze to the bottom: their items need no second look. */
const frozenLists = new WeakSet<readonly unknown[]>();

/**
 * Deep-freezes what a reducer returned from `previous` (the value it reduced). A list that keeps
 * `previous`'s items in their places and adds some (the usual `concat`) only has its new items walked:
 * the kept ones were frozen to the bottom when `previous` was, so a list growing by one item per step
 * costs one item per step, not its length. Anything else is walked whole, as before.
 */
function freezeMerged(merged: unknown, previous: unknown): void {
  if (!Array.isArray(merged)) return deepFreeze(merged);
  if (Object.isFrozen(merged)) {
    // Frozen by the reducer, maybe shallowly: its items are walked (and the list is not vouched for).
    for (let i = 0; i < merged.length; i++) deepFreeze(merged[i]);
    return;
  }
  if (!Array.isArray(previous) || !frozenLists.has(previous)) {
    deepFreeze(merged);
    frozenLists.add(merged);
    return;
  }
  // Walked before it is frozen: V8 reads the items of a frozen array about twice as slowly.
  const kept = Math.min(merged.length, previous.length);
  for (let i = 0; i < kept; i++) {
    const item: unknown = merged[i];
    if (item !== previous[i]) deepFreeze(item);
  }
  for (let i = kept; i < merged.length; i++) deepFreeze(merged[i]);
  Object.freeze(merged);
  frozenLists.add(merged);
}
