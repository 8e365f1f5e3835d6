import type { ClassConstructor } from 'class-transformer';
import { validateSync, type ValidationError } from 'class-validator';
import { serialize } from './serializer';
import { defineData, deserialize } from './value-decoder';
import type { Class } from '../../decorators/options';
import { declaredTypeOf, propertyExecutor, propertyPlan, STATE_VALIDATOR_OPTIONS, validateProperties } from './property-validation';
import { InvalidStateError, WaypointError, type StateIssue } from '../../contract/errors';
import { deepFreeze, setOwn, type SharedState } from './state-frame';

export type { SharedState } from './state-frame';

let transformer: typeof import('class-transformer') | undefined;

/**
 * class-transformer's `plainToInstance`, with the package (34 modules, tens of ms of a fresh process)
 * loaded on the first state that needs it: a program whose steps declare no state class, or whose state
 * class has no class-transformer metadata, never loads it.
 */
function plainToInstance(type: ClassConstructor<unknown>, plain: object, options: { exposeDefaultValues: boolean }): unknown {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- deferred to first use, to keep it off a fresh process's first step
  transformer ??= require('class-transformer') as typeof import('class-transformer');
  return transformer.plainToInstance(type, plain, options);
}
// strictState's entry points, where the composition root already imports the state schema from.

/**
 * Builds the initial state from the run input: the state class's defaults, overwritten by the input's
 * own properties. The input is copied first, unless `owned`: the caller decoded it for this state alone
 * (a restore's base state, 1.5 MB in a long realistic run, is not copied twice); either way it is frozen.
 */
export function createState(stateClass: Class | undefined, input: unknown, where: { runId: string }, owned = false): SharedState {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new InvalidStateError(
      `Input of run '${where.runId}' must be an object, got ${input === null ? 'null' : Array.isArray(input) ? 'an array' : typeof input}. Nothing was written: pass the input as a plain object of state properties.`,
      [],
      where,
    );
  }
  // A private deep copy: the state is frozen, and the caller's objects must stay theirs.
  const copy = owned ? (input as Record<string, unknown>) : deserialize<Record<string, unknown>>(serialize(input, { runId: where.runId, what: 'input' }));
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
  const plan = propertyPlan(stateClass);
  const Executor = propertyExecutor();
  if (Executor && plan.plainCopy) {
    // Every property with rules, by the path an update takes: the same errors as validating the whole
    // instance, without class-transformer's deep copy of the state (a run starts and loads with it).
    const instance = plainInstance(stateClass, state);
    const properties = [...plan.rules.keys()];
    for (const key of properties) reviveNested(stateClass, instance, key);
    const errors = validateProperties(plan, instance, properties, Executor);
    if (errors.length > 0) raise(errors, context);
  } else validateWholeClass(stateClass, state, context);
}

/**
 * `validateSync` over a class-transformer instance of the whole state class: what `validateState` and
 * `validateUpdate` must agree with (their tests hold them to it), and what `validateState` falls back to
 * (`validateUpdate`, without class-validator's per-property executor, runs `validateSync` on the update).
 */
export function validateWholeClass(stateClass: Class, state: SharedState, context: { runId: string; step?: string; phase: string }): void {
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
  const errors = Executor ? validateProperties(plan, instance, touched, Executor) : validateSync(instance, STATE_VALIDATOR_OPTIONS).filter((e) => touched.includes(e.property));
  if (errors.length > 0) raise(errors, context);
}

/**
 * What `plainToInstance(stateClass, update, { exposeDefaultValues: false })` builds for a class without
 * class-transformer metadata or accessors (see `PropertyPlan.plainCopy`): a new instance with the update's
 * properties set on it. class-transformer would also deep-copy each value; the values here are a private
 * decoded copy that validation only reads, so they are set as they are (nested plain objects declared
 * with a class type are still rebuilt as instances of it by `reviveNested`, through class-transformer).
 */
function plainInstance(stateClass: Class, update: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const instance = new stateClass() as Record<string, unknown>;
  for (const key of Object.keys(update)) setOwn(instance, key, update[key]);
  return instance;
}

function raise(errors: ValidationError[], context: { runId: string; step?: string; phase: string }): never {
  const issues = flatten(errors);
  const list = issues.map((i) => `${i.property} (${Object.values(i.constraints).join('; ')})`).join(', ');
  throw new InvalidStateError(`${invalidWhere(context)}: ${list}. ${ADVICE[context.phase] ?? 'Nothing was recorded.'}`, issues, context);
}

/** The first words of an INVALID_STATE message: whose state, found invalid where. */
function invalidWhere({ runId, step, phase }: { runId: string; step?: string; phase: string }): string {
  if (phase === 'produced') return `Step '${step ?? '?'}' of run '${runId}' produced an invalid state`;
  if (phase === 'in the input') return `The input of run '${runId}' is invalid`;
  if (phase === 'loaded from the store') return `The state of run '${runId}' loaded from the store is invalid`;
  return `The state ${phase}${step ? ` at '${step}'` : ''} of run '${runId}' is invalid`;
}

const ADVICE: Record<string, string> = {
  produced: 'Nothing was recorded: return values the state class accepts.',
  'in the input': 'Nothing was stored: correct the input.',
  'loaded from the store': 'The rows were written under other rules: register a checkpoint migration for the new state class, or fork the run.',
};

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
