import 'reflect-metadata';
import type { PipelineOptions, StepOptions } from './options';

/**
 * Every metadata key and every `Reflect` call of Waypoint lives here: decorators write through these
 * helpers, and the runtime reads through them: the plan room (src/core/plan/) for Waypoint's own metadata,
 * the state schema's property validation (src/core/state/) and the agent factory's error message
 * (src/core/step/agent-factory.ts) for TypeScript's own `design:type` / `design:paramtypes`.
 */
const PIPELINE = Symbol.for('waypoint:pipeline');
const STEPS = Symbol.for('waypoint:steps');

/** One `@Step` as recorded on its class, in declaration order. */
export interface RecordedStep {
  method: string;
  options: StepOptions;
}

export function recordPipeline(target: object, options: PipelineOptions): void {
  Reflect.defineMetadata(PIPELINE, options, target);
}

export function readPipeline(target: object): PipelineOptions | undefined {
  return Reflect.getOwnMetadata(PIPELINE, target) as PipelineOptions | undefined;
}

// The step names a class has declared so far, so each `@Step` checks its name in constant time: decorating a
// class stays linear in its steps (20,000 steps took 11.8 s when each copied the list and searched it).
const STEP_NAMES = new WeakMap<object, Set<string>>();

/** Adds a step to its class's own list, in place (the list is the class's own metadata, made on first use). */
export function recordStep(ctor: object, step: RecordedStep): void {
  let own = Reflect.getOwnMetadata(STEPS, ctor) as RecordedStep[] | undefined;
  if (!own) Reflect.defineMetadata(STEPS, (own = []), ctor);
  own.push(step);
  let names = STEP_NAMES.get(ctor);
  if (!names) STEP_NAMES.set(ctor, (names = new Set()));
  names.add(step.options.name ?? step.method);
}

/** True when this class itself (not an ancestor) already declares a step named `name`. */
export function hasOwnStepNamed(ctor: object, name: string): boolean {
  return STEP_NAMES.get(ctor)?.has(name) ?? false;
}

/** Steps declared on this class itself (not inherited), in declaration order; read-only to callers. */
export function readOwnSteps(ctor: object): readonly RecordedStep[] {
  return (Reflect.getOwnMetadata(STEPS, ctor) as RecordedStep[] | undefined) ?? [];
}

const SECRETS = Symbol.for('waypoint:secrets');

export function recordSecret(ctor: object, property: string): void {
  const own = (Reflect.getOwnMetadata(SECRETS, ctor) as string[] | undefined) ?? [];
  Reflect.defineMetadata(SECRETS, [...own, property], ctor);
}

/** Secret properties of a state class, its ancestors' included. */
export function readSecrets(ctor: object): string[] {
  return (Reflect.getMetadata(SECRETS, ctor) as string[] | undefined) ?? [];
}

/**
 * The type TypeScript recorded for a decorated property (`design:type`, emitted under
 * `emitDecoratorMetadata` for properties carrying any decorator, class-validator's included), or
 * undefined. The state schema uses it to rebuild nested state classes from plain stored data.
 *
 * @example
 * class State { @ValidateNested() address!: Address }
 * readDeclaredType(State.prototype, 'address'); // Address
 */
export function readDeclaredType(prototype: object, property: string): unknown {
  return Reflect.getMetadata('design:type', prototype, property) as unknown;
}

const REDUCERS = Symbol.for('waypoint:reducers');

/** A state property's reducer: how an update of it merges into the current value. */
// A method's parameters are compared both ways (strictFunctionTypes spares methods), so a reducer written for
// its property's type, `(current: string[] | undefined, update: string[]) => string[]`, is a ReducerFn, and the
// runtime can call one with the stored values it holds as `unknown`.
export type ReducerFn = { merge(current: unknown, update: unknown): unknown }['merge'];

export function recordReducer(ctor: object, property: string, reducer: ReducerFn): void {
  const own = (Reflect.getOwnMetadata(REDUCERS, ctor) as Record<string, ReducerFn> | undefined) ?? {};
  Reflect.defineMetadata(REDUCERS, { ...own, [property]: reducer }, ctor);
}

/** Reducers of a state class by property, its ancestors' included (a subclass's own win). */
export function readReducers(ctor: object): Record<string, ReducerFn> {
  const chain: object[] = [];
  for (let c: object | null = ctor; c && c !== Function.prototype; c = Object.getPrototypeOf(c) as object | null) chain.unshift(c);
  return Object.assign({}, ...chain.map((c) => (Reflect.getOwnMetadata(REDUCERS, c) as Record<string, ReducerFn> | undefined) ?? {})) as Record<string, ReducerFn>;
}

/** The constructor parameter types TypeScript recorded for `ctor` (emitDecoratorMetadata), if any. */
export function readParamTypes(ctor: object): unknown[] | undefined {
  return Reflect.getOwnMetadata('design:paramtypes', ctor) as unknown[] | undefined;
}
