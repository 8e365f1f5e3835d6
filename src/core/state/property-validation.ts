import { getMetadataStorage, ValidationTypes, Validator, type ValidationError, type ValidatorOptions } from 'class-validator';
import type { Class } from '../../decorators/options';
import { readDeclaredType } from '../../decorators/metadata';

/**
 * class-validator, property by property. `validateSync` walks every rule of a class; a step's update
 * sets a few properties of a state class that may declare hundreds, so validating it that way costs the
 * width of the schema at every step. This runs class-validator's own executor (`ValidationExecutor`,
 * the engine behind `validateSync`) on the rules of the properties asked for only, which yields the
 * errors `validateSync` would report for those properties, built by the same code: same constraints,
 * messages, nested children, `@IsOptional`, `@ValidateIf`, `@IsDefined`, custom validators.
 *
 * The rules are grouped per property once per class (class-validator's metadata and TypeScript's
 * `design:type` are read then, never on the per-step path).
 */

/** The options every state validation runs with (class-validator's own defaults otherwise). */
export const STATE_VALIDATOR_OPTIONS: ValidatorOptions = { forbidUnknownValues: false, validationError: { target: false, value: false } };

/** One rule as class-validator's metadata storage holds it (its type is not exported by the package index). */
type ValidationMetadata = ReturnType<ReturnType<typeof getMetadataStorage>['getTargetValidationMetadatas']>[number];

/** One property's rules, split as `ValidationExecutor.execute` splits them. */
interface PropertyRules {
  /** Position in the class's rule order: errors come out in the order `validateSync` gives them. */
  order: number;
  defined: ValidationMetadata[];
  others: ValidationMetadata[];
  /** The same rules ready for `passes`, or null when one of them is of a kind only the executor runs (nested, promise). */
  quick: QuickRules | null;
}

/** A constraint class's validators as class-validator's storage lists them (`getTargetValidatorConstraints`). */
type ConstraintMetadata = ReturnType<ReturnType<typeof getMetadataStorage>['getTargetValidatorConstraints']>[number];

/** A property's rules in the order `performValidations` runs them, with their constraint validators looked up. */
interface QuickRules {
  conditions: ValidationMetadata[];
  checks: { rule: ValidationMetadata; validators: ConstraintMetadata[] }[];
}

/** What validating a state class's properties needs, computed once per class. */
export interface PropertyPlan {
  readonly rules: ReadonlyMap<string, PropertyRules>;
  /**
   * True when class-transformer would only copy an update onto a new instance of the class: the class
   * and its ancestors have no class-transformer metadata (`@Type`, `@Transform`, `@Expose`, `@Exclude`)
   * and no accessors. Then validating an update skips class-transformer (most of its per-step cost).
   */
  readonly plainCopy: boolean;
}

/**
 * The part of class-validator's `ValidationExecutor` (0.14, 0.15) this relies on. `performValidations`
 * is the method `execute` calls for each property; it is not part of the typed API, so its presence is
 * checked once (see `propertyExecutor`) and whole-class validation is used when it is missing.
 */
interface PropertyExecutor {
  ignoreAsyncValidations: boolean;
  performValidations(object: object, value: unknown, propertyName: string, defined: ValidationMetadata[], others: ValidationMetadata[], errors: ValidationError[]): void;
  stripEmptyErrors(errors: ValidationError[]): ValidationError[];
}

type ExecutorClass = new (validator: Validator, options: ValidatorOptions) => PropertyExecutor;

let executorClass: ExecutorClass | null | undefined;
const validator = new Validator();

/**
 * class-validator's executor, or null when this class-validator has no per-property entry point (then
 * callers validate the whole class and filter, which is correct, only slower).
 */
export function propertyExecutor(): ExecutorClass | null {
  if (executorClass !== undefined) return executorClass;
  try {
    // Not re-exported by the package index; the package has no "exports" map, so the file is reachable.
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- an internal file another class-validator version may not have: its absence is caught below
    const loaded = (require('class-validator/cjs/validation/ValidationExecutor') as { ValidationExecutor?: ExecutorClass }).ValidationExecutor;
    const proto = loaded?.prototype as Partial<PropertyExecutor> | undefined;
    executorClass = loaded && typeof proto?.performValidations === 'function' && typeof proto.stripEmptyErrors === 'function' ? loaded : null;
  } catch {
    executorClass = null;
  }
  return executorClass;
}

const plans = new WeakMap<Class, PropertyPlan>();

/** The per-property rules of a state class (its ancestors' included), computed on first use and cached. */
export function propertyPlan(stateClass: Class): PropertyPlan {
  let plan = plans.get(stateClass);
  if (plan) return plan;
  const storage = getMetadataStorage();
  // The call validateSync(instance, STATE_VALIDATOR_OPTIONS) makes: no schema, no groups, `always` off.
  const grouped = storage.groupByPropertyName(storage.getTargetValidationMetadatas(stateClass, undefined as unknown as string, false, false, undefined));
  const rules = new Map<string, PropertyRules>();
  Object.keys(grouped).forEach((property, order) => {
    const all = grouped[property];
    const defined = all.filter((m) => m.type === ValidationTypes.IS_DEFINED);
    const others = all.filter((m) => m.type !== ValidationTypes.IS_DEFINED && m.type !== ValidationTypes.WHITELIST);
    rules.set(property, { order, defined, others, quick: quickRules(storage, defined, others) });
  });
  plan = { rules, plainCopy: !hasTransformerMetadata(stateClass) && !hasAccessors(stateClass) };
  plans.set(stateClass, plan);
  return plan;
}

/**
 * The errors `validateSync(instance, STATE_VALIDATOR_OPTIONS)` reports for `properties` of `instance`
 * (each a property with rules, in any order), computed from those properties' rules alone.
 *
 * @example
 * const plan = propertyPlan(State);
 * validateProperties(plan, toInstance(State, update), ['title']); // [] when valid
 */
export function validateProperties(plan: PropertyPlan, instance: object, properties: readonly string[], Executor: ExecutorClass): ValidationError[] {
  // A property whose every rule passes yields no error: the executor (which builds an error object per
  // property, filters the rules and looks the validators up again) runs only for the others.
  let failing: string[] | null = null;
  for (const property of properties) {
    const quick = plan.rules.get(property)!.quick;
    if (!quick || !passes(quick, instance, (instance as Record<string, unknown>)[property])) (failing ??= []).push(property);
  }
  if (!failing) return [];
  const ordered = failing.length > 1 ? failing.sort((a, b) => plan.rules.get(a)!.order - plan.rules.get(b)!.order) : failing;
  const executor = new Executor(validator, STATE_VALIDATOR_OPTIONS);
  executor.ignoreAsyncValidations = true; // as validateSync does
  const errors: ValidationError[] = [];
  for (const property of ordered) {
    const rules = plan.rules.get(property)!;
    executor.performValidations(instance, (instance as Record<string, unknown>)[property], property, rules.defined, rules.others, errors);
  }
  return executor.stripEmptyErrors(errors);
}

/**
 * The rules of one property prepared for `passes`: conditions (`@IsOptional`, `@ValidateIf`), then the
 * `@IsDefined` rules, then the custom ones, as `performValidations` orders them. Null when a rule is of a
 * kind `passes` does not run (nested or promise validation): the executor checks such a property.
 */
function quickRules(storage: ReturnType<typeof getMetadataStorage>, defined: ValidationMetadata[], others: ValidationMetadata[]): QuickRules | null {
  const conditions: ValidationMetadata[] = [];
  const custom: ValidationMetadata[] = [];
  for (const rule of others) {
    if (rule.type === ValidationTypes.CONDITIONAL_VALIDATION) conditions.push(rule);
    else if (rule.type === ValidationTypes.CUSTOM_VALIDATION) custom.push(rule);
    else return null;
  }
  const checks = [...defined, ...custom].map((rule) => ({ rule, validators: storage.getTargetValidatorConstraints(rule.constraintCls).filter((v) => !v.async) }));
  return { conditions, checks };
}

/**
 * Whether `performValidations` (with `validateSync`'s options) would record no constraint for this
 * value: every condition holds and every synchronous validator says yes, or a condition skips the
 * property. False when a validator fails or answers with a promise (the executor then runs and builds
 * the error exactly as before: validators are called again on that path, which is taken only when a
 * step's update is refused or a validator is asynchronous).
 */
function passes(quick: QuickRules, object: object, value: unknown): boolean {
  let validate = true;
  // All conditions are called, as class-validator calls them, before their results are combined.
  for (const condition of quick.conditions) validate = (condition.constraints[0] as (o: object, v: unknown) => boolean)(object, value) && validate;
  if (!validate) return true;
  for (const { rule, validators } of quick.checks) {
    if (rule.validateIf && !rule.validateIf(object, value)) continue;
    for (const validator of validators) {
      const args = { targetName: object.constructor?.name, property: rule.propertyName, object, value, constraints: rule.constraints as unknown[] };
      const instance = validator.instance as { validate(value: unknown, args: unknown): unknown };
      if (rule.each && (Array.isArray(value) || value instanceof Set || value instanceof Map)) {
        for (const item of value instanceof Map ? value.values() : (value as Iterable<unknown>)) if (!answeredYes(instance.validate(item, args))) return false;
      } else if (!answeredYes(instance.validate(value, args))) return false;
    }
  }
  return true;
}

/** A validator's answer counts as a pass only when it is a truthy value now (a promise goes to the executor). */
function answeredYes(answer: unknown): boolean {
  return !!answer && !(typeof answer === 'object' && typeof (answer as { then?: unknown }).then === 'function');
}

/** The maps class-transformer's default metadata storage keeps per class (0.5): not typed API, so checked. */
const TRANSFORMER_MAPS = ['_typeMetadatas', '_transformMetadatas', '_exposeMetadatas', '_excludeMetadatas'] as const;

/**
 * Whether class-transformer holds any metadata for `type` or an ancestor. When its storage does not look
 * as expected (another class-transformer version), says yes: class-transformer is then always used.
 */
function hasTransformerMetadata(type: Class): boolean {
  let storage: Record<string, unknown> | undefined;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- an internal file another class-transformer version may not have: its absence is caught below
    storage = (require('class-transformer/cjs/storage') as { defaultMetadataStorage?: Record<string, unknown> }).defaultMetadataStorage;
  } catch {
    return true;
  }
  if (!storage) return true;
  const maps = TRANSFORMER_MAPS.map((name) => storage[name]);
  if (!maps.every((map) => map instanceof Map)) return true;
  for (let c: unknown = type; typeof c === 'function' && c !== Function.prototype; c = Object.getPrototypeOf(c)) {
    if ((maps as Map<unknown, unknown>[]).some((map) => map.has(c))) return true;
  }
  return false;
}

/**
 * The properties class-transformer holds metadata for (`@Type`, `@Transform`, `@Expose`, `@Exclude`) on
 * `type` and its ancestors; empty when its storage does not look as expected (another version).
 */
export function transformerProperties(type: Class): string[] {
  let storage: Record<string, unknown> | undefined;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- as in hasTransformerMetadata
    storage = (require('class-transformer/cjs/storage') as { defaultMetadataStorage?: Record<string, unknown> }).defaultMetadataStorage;
  } catch {
    return [];
  }
  const maps = TRANSFORMER_MAPS.map((name) => storage?.[name]).filter((map): map is Map<unknown, unknown> => map instanceof Map);
  const found: string[] = [];
  for (let c: unknown = type; typeof c === 'function' && c !== Function.prototype; c = Object.getPrototypeOf(c)) {
    for (const map of maps) {
      const byProperty = map.get(c);
      if (byProperty instanceof Map) for (const key of byProperty.keys()) if (typeof key === 'string') found.push(key);
    }
  }
  return found;
}

/** Whether the class's prototype chain (below Object) defines a getter or setter, which class-transformer treats specially. */
function hasAccessors(type: Class): boolean {
  for (let p = type.prototype as object | null; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
    for (const name of Object.getOwnPropertyNames(p)) {
      const d = Object.getOwnPropertyDescriptor(p, name);
      if (d && (d.get || d.set)) return true;
    }
  }
  return false;
}

const declaredTypes = new WeakMap<Class, Map<string, unknown>>();

/**
 * `design:type` of a class's property, read once per (class, property): rebuilding nested state from
 * plain data asks for it at every step that sets the property.
 */
export function declaredTypeOf(type: Class, property: string): unknown {
  let byProperty = declaredTypes.get(type);
  if (!byProperty) declaredTypes.set(type, (byProperty = new Map<string, unknown>()));
  const known = byProperty.get(property);
  if (known !== undefined) return known;
  const declared = readDeclaredType(type.prototype as object, property);
  // Only declared properties are kept: they are bounded by the class, while the keys a state may hold
  // (one per step, per item...) are not, and an undeclared key is only looked up at run start or load.
  if (declared !== undefined) byProperty.set(property, declared);
  return declared;
}
