import { getMetadataStorage, ValidationTypes, Validator, type ValidationError, type ValidatorOptions } from 'class-validator';
import type { Class } from '../decorators/options';
import { readDeclaredType } from '../decorators/metadata';

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
    rules.set(property, {
      order,
      defined: all.filter((m) => m.type === ValidationTypes.IS_DEFINED),
      others: all.filter((m) => m.type !== ValidationTypes.IS_DEFINED && m.type !== ValidationTypes.WHITELIST),
    });
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
  const ordered = properties.length > 1 ? [...properties].sort((a, b) => plan.rules.get(a)!.order - plan.rules.get(b)!.order) : properties;
  const executor = new Executor(validator, STATE_VALIDATOR_OPTIONS);
  executor.ignoreAsyncValidations = true; // as validateSync does
  const errors: ValidationError[] = [];
  for (const property of ordered) {
    const rules = plan.rules.get(property)!;
    executor.performValidations(instance, (instance as Record<string, unknown>)[property], property, rules.defined, rules.others, errors);
  }
  return executor.stripEmptyErrors(errors);
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
