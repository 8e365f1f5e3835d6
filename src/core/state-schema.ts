import { plainToInstance } from 'class-transformer';
import { validateSync, type ValidationError } from 'class-validator';
import { defineData, deserialize, serialize } from './serializer';
import type { Class } from '../decorators/options';
import { declaredTypeOf, propertyExecutor, propertyPlan, STATE_VALIDATOR_OPTIONS, validateProperties } from './property-validation';
import { InvalidStateError, WaypointError, type StateIssue } from './errors';

/**
 * The pipeline's shared state: an instance of its state class (or a plain object when it has none),
 * validated with class-validator and frozen, so a step can read it but never change it in place.
 */
export type SharedState = Readonly<Record<string, unknown>>;

/**
 * Builds the initial state from the run input: the state class's defaults, overwritten by the input's
 * own properties. The input must be a private copy (the runtime passes a decoded one): it is frozen.
 */
export function createState(stateClass: Class | undefined, input: unknown, where: { runId: string }): SharedState {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new InvalidStateError(
      `Input of run '${where.runId}' must be an object, got ${input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input}. Nothing was written.`,
      [],
      where,
    );
  }
  // A private deep copy: the state is frozen, and the caller's objects must stay theirs.
  const copy = deserialize<Record<string, unknown>>(serialize(input, { runId: where.runId, what: 'input' }));
  const state = assignOwn(stateClass ? new stateClass() : {}, copy);
  return freezeState(state as Record<string, unknown>);
}

/**
 * Validates a state against its class; throws `InvalidStateError` with each failing property path.
 * Nested objects are turned into their classes first (class-transformer, `@Type` as usual), so
 * `@ValidateNested` rules apply to data rebuilt from storage too.
 */
export function validateState(stateClass: Class | undefined, state: SharedState, context: { runId: string; step?: string; phase: string }): void {
  if (!stateClass) return;
  const errors = validateSync(toInstance(stateClass, { ...state }), STATE_VALIDATOR_OPTIONS);
  if (errors.length > 0) raise(errors, context);
}

/**
 * Validates what a step's update sets: the rules of those properties only (with their nested
 * validation), so the per-step cost follows the update, not the width of the state class or the size
 * of the state. Throws the `InvalidStateError` that validating the whole class and keeping the errors of
 * the changed properties gives (same constraints, messages and issues). Properties the update does not
 * set are not looked at: they were checked when they were set (or when the run started or was loaded).
 */
export function validateUpdate(stateClass: Class | undefined, update: Record<string, unknown>, context: { runId: string; step?: string; phase: string }): void {
  if (!stateClass) return;
  const plan = propertyPlan(stateClass);
  let touched: string[] | null = null;
  for (const key of Object.keys(update)) if (plan.rules.has(key)) (touched ??= []).push(key);
  // No rule on any changed property: nothing to check (and no class-transformer / validator work).
  if (!touched) return;
  const Executor = propertyExecutor();
  const instance = plan.plainCopy ? plainInstance(stateClass, update) : (plainToInstance(stateClass, update, { exposeDefaultValues: false }) as Record<string, unknown>);
  for (const key of touched) reviveNested(stateClass, instance, key);
  const keys = new Set(touched);
  const errors = Executor ? validateProperties(plan, instance, touched, Executor) : validateSync(instance, STATE_VALIDATOR_OPTIONS).filter((e) => keys.has(e.property));
  if (errors.length > 0) raise(errors, context);
}

/**
 * What `plainToInstance(stateClass, update, { exposeDefaultValues: false })` builds for a class without
 * class-transformer metadata or accessors (see `PropertyPlan.plainCopy`): a new instance with the update's
 * properties set on it. class-transformer would also deep-copy each value; the values here are a private
 * decoded copy that validation only reads, so they are set as they are (nested plain objects declared
 * with a class type are still rebuilt as instances of it by `reviveNested`, through class-transformer).
 */
function plainInstance(stateClass: Class, update: Record<string, unknown>): Record<string, unknown> {
  const instance = new stateClass() as Record<string, unknown>;
  for (const key of Object.keys(update)) setOwn(instance, key, update[key]);
  return instance;
}

function raise(errors: ValidationError[], context: { runId: string; step?: string; phase: string }): never {
  const issues = flatten(errors);
  const list = issues.map((i) => `${i.property} (${Object.values(i.constraints).join('; ')})`).join(', ');
  throw new InvalidStateError(`Invalid state ${context.phase} of run '${context.runId}'${context.step ? ` after step '${context.step}'` : ''}: ${list}.`, issues, context);
}

function flatten(errors: ValidationError[], prefix = ''): StateIssue[] {
  return errors.flatMap((e) => {
    const property = prefix ? `${prefix}.${e.property}` : e.property;
    const own: StateIssue[] = e.constraints ? [{ property, constraints: { ...e.constraints } }] : [];
    return [...own, ...flatten(e.children ?? [], property)];
  });
}

const BUILTINS = new Set<unknown>([Object, Array, String, Number, Boolean, Date, Map, Set, Promise, Function, Symbol, BigInt]);

/**
 * The object class-validator checks: class-transformer builds `@Type` nested classes, and a nested
 * plain object whose property is declared with a class type becomes an instance of it, so
 * `@ValidateNested` also works for state rebuilt from storage without a `@Type` on every property.
 */
function toInstance(type: Class, plain: Record<string, unknown>): object {
  const instance = plainToInstance(type, plain, { exposeDefaultValues: false }) as Record<string, unknown>;
  for (const key of Object.keys(instance)) reviveNested(type, instance, key);
  return instance;
}

/** Turns `instance[key]`, when it is a plain object declared with a class type, into an instance of that class. */
function reviveNested(type: Class, instance: Record<string, unknown>, key: string): void {
  const value = instance[key];
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return;
  const declared = declaredTypeOf(type, key);
  if (typeof declared === 'function' && !BUILTINS.has(declared)) defineData(instance, key, toInstance(declared as Class, value as Record<string, unknown>));
}

function assignOwn(target: object, source: object): object {
  for (const key of Object.keys(source)) defineData(target, key, (source as Record<string, unknown>)[key]);
  return target;
}

function freezeState(state: Record<string, unknown>): SharedState {
  for (const key of Object.keys(state)) deepFreeze(state[key]);
  return Object.freeze(state);
}

function deepFreeze(value: unknown): void {
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
  Object.freeze(merged);
  const kept = Math.min(merged.length, previous.length);
  for (let i = 0; i < merged.length; i++) {
    const item: unknown = merged[i];
    if (i >= kept || item !== previous[i]) deepFreeze(item);
  }
  frozenLists.add(merged);
}

/**
 * Refuses to store a `@Secret()` property in clear text: throws `SECRET_NOT_PROTECTED` when `value`
 * carries one and payloads are not encrypted.
 */
export function assertSecretsProtected(secrets: readonly string[], encrypted: boolean, value: object, where: { runId: string; step?: string; what: string }): void {
  if (encrypted || secrets.length === 0) return;
  const found = secrets.filter((key) => Object.prototype.hasOwnProperty.call(value, key) && (value as Record<string, unknown>)[key] !== undefined);
  if (found.length === 0) return;
  throw new WaypointError(
    'SECRET_NOT_PROTECTED',
    `The ${where.what} of run '${where.runId}'${where.step ? ` (step '${where.step}')` : ''} carries secret propert${found.length > 1 ? 'ies' : 'y'} ${found.join(', ')}, ` +
      'and no encryption key is configured, so it would be stored in clear text. Nothing was written. Configure Waypoint.create({ encryption }) or keep the value out of the state.',
    where,
  );
}

const READ_ONLY: ProxyHandler<object> = {
  set(_target, key) {
    throw new TypeError(`ctx.state is read-only (tried to set '${String(key)}'): return { ${String(key)}: ... } from the step instead.`);
  },
  defineProperty(_target, key) {
    throw new TypeError(`ctx.state is read-only (tried to define '${String(key)}'): return the change from the step instead.`);
  },
  deleteProperty(_target, key) {
    throw new TypeError(`ctx.state is read-only (tried to delete '${String(key)}'): return { ${String(key)}: undefined } from the step instead.`);
  },
  setPrototypeOf() {
    throw new TypeError('ctx.state is read-only.');
  },
};

/**
 * The shared state of a running run: one accumulator that each recorded update is written into, seen by
 * steps through a read-only view. Applying an update costs what the update holds, not the whole state
 * (a copy per step made long runs with a growing state quadratic). Nested values are frozen as they are
 * merged. A step must not keep `ctx.state` past its own end: the view shows the latest state.
 */
export class StateAccumulator {
  private readonly target: Record<string, unknown>;
  /** What steps get as `ctx.state`. */
  readonly view: SharedState;

  constructor(initial: SharedState) {
    this.target = Object.create(Object.getPrototypeOf(initial) as object | null) as Record<string, unknown>;
    for (const key of Object.keys(initial)) setOwn(this.target, key, initial[key]);
    this.view = new Proxy(this.target, READ_ONLY) as SharedState;
  }

  /** Merges a recorded update (a private, decoded copy: its values are frozen, not copied). */
  apply(update: Record<string, unknown>): void {
    for (const key of Object.keys(update)) {
      deepFreeze(update[key]);
      setOwn(this.target, key, update[key]);
    }
  }
}

function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
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
    private readonly reducers: Readonly<Record<string, (current: any, update: any) => unknown>>,
    tracked = true,
  ) {
    this.target = Object.create(Object.getPrototypeOf(initial) as object | null) as Record<string, unknown>;
    for (const key of Object.keys(initial)) setOwn(this.target, key, initial[key]);
    this.view = new Proxy(this.target, READ_ONLY) as SharedState;
    this.delta = tracked ? (Object.create(null) as Record<string, unknown>) : null;
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
      const reducer = Object.prototype.hasOwnProperty.call(this.reducers, key) ? this.reducers[key] : undefined;
      const delta = this.delta;
      if (reducer) {
        const current = this.target[key];
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
    if (!this.delta) throw new Error('StateFrame.changes(): the root frame of a run does not track its changes');
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(this.delta)) setOwn(out, key, this.delta[key]);
    return out;
  }
}
