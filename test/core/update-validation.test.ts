import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Type } from 'class-transformer';
import { IsDefined, IsInt, IsOptional, IsString, Length, Min, Validate, ValidateIf, ValidateNested, ValidatorConstraint, type ValidatorConstraintInterface } from 'class-validator';
import { InvalidStateError } from '../../src/index';
import { validateState, validateUpdate, validateWholeClass } from '../../src/core/state/state-schema';
import { propertyExecutor, propertyPlan, validateProperties } from '../../src/core/state/property-validation';

/**
 * validateUpdate checks the properties a step sets, property by property. What it rejects, and how, must
 * be exactly what validating the whole state class rejects for those properties: each case below is
 * checked against whole-class validation (validateWholeClass: class-validator's validateSync over the
 * whole instance) of a valid state with the update merged in. validateState, which takes the same
 * per-property path for every property of a class class-transformer would only copy onto, is held to
 * it too.
 */

class Address {
  @IsString() city!: string;
  @Length(5, 5) zip!: string;
}

@ValidatorConstraint({ name: 'isEven' })
class IsEven implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return typeof value === 'number' && value % 2 === 0;
  }
  defaultMessage(): string {
    return '$property must be even';
  }
}

class WideState {
  @IsString() title!: string;
  @IsOptional() @IsInt() @Min(0) count?: number;
  @IsOptional() @ValidateNested() @Type(() => Address) address?: Address;
  // No @Type: rebuilt from TypeScript's design:type, as state loaded from storage is.
  @IsOptional() @ValidateNested() home?: Address;
  @IsOptional() @ValidateNested({ each: true }) @Type(() => Address) addresses?: Address[];
  @IsOptional() @IsString({ each: true }) tags?: string[];
  @IsDefined() must!: string;
  @IsOptional() @Validate(IsEven) even?: number;
  @ValidateIf((o: { count?: number }) => o.count !== undefined && o.count > 10) @IsString() reason?: string;
  @IsOptional() @IsString({ groups: ['admin'] }) adminNote?: unknown;
  @IsOptional() @IsString({ groups: ['audit'], always: true }) audited?: unknown;
  plain?: unknown;
}

const base = { title: 'report', must: 'yes' };
const context = { runId: 'upd-run', step: 'A.s1', phase: 'produced' };

type Outcome = 'accepted' | { code: string; message: string; issues: unknown };

function outcome(fn: () => void): Outcome {
  try {
    fn();
    return 'accepted';
  } catch (error) {
    assert.ok(error instanceof InvalidStateError, `expected InvalidStateError, got ${String(error)}`);
    return { code: error.code, message: error.message, issues: error.issues };
  }
}

const cases: [label: string, update: Record<string, unknown>, rejected: boolean][] = [
  ['a valid update', { title: 'new title', count: 2 }, false],
  ['a wrong type', { count: 'three' }, true],
  ['a value under its minimum', { count: -1 }, true],
  ['two invalid properties, given in reverse rule order', { must: 5, count: -1, title: 5 }, true],
  ['a nested object with invalid properties (@Type)', { address: { city: 1, zip: 'abc' } }, true],
  ['a nested plain object typed by design:type', { home: { city: 'Paris', zip: '1' } }, true],
  [
    'a nested array with one invalid item',
    {
      addresses: [
        { city: 'a', zip: '12345' },
        { city: 2, zip: '1' },
      ],
    },
    true,
  ],
  ['a nested property that is not an object', { address: 'rue de la Paix' }, true],
  ['an array with an item of the wrong type (each)', { tags: ['a', 3] }, true],
  ['a required property set to undefined', { title: undefined }, true],
  ['an @IsDefined property set to undefined', { must: undefined }, true],
  ['a value a custom validator refuses', { even: 3 }, true],
  ['a value a custom validator accepts', { even: 4 }, false],
  ['a conditional rule whose condition holds in the update', { count: 11, reason: 7 }, true],
  ['a conditional rule whose condition does not hold', { count: 1, reason: 7 }, false],
  ['an unknown property', { whatever: 1 }, false],
  ['an unknown property beside an invalid one', { whatever: 1, count: 'x' }, true],
  ['a property without rules', { plain: { any: 'thing' } }, false],
  ['a rule of a group (validateSync without groups runs it too)', { adminNote: 5 }, true],
  ['a rule of a group marked always', { audited: 5 }, true],
  ['null for an optional property', { count: null }, false],
];

describe('validateUpdate: the errors whole-class validation gives for the changed properties', () => {
  it('uses class-validator per property (not a silent fallback to the whole class)', () => {
    assert.notEqual(propertyExecutor(), null);
  });

  for (const [label, update, rejected] of cases) {
    it(`${rejected ? 'rejects' : 'accepts'} ${label}, as whole-class validation does`, () => {
      const perProperty = outcome(() => validateUpdate(WideState, update, context));
      const wholeClass = outcome(() => validateWholeClass(WideState, { ...base, ...update }, context));
      assert.deepEqual(perProperty, wholeClass);
      assert.deepEqual(
        outcome(() => validateState(WideState, { ...base, ...update }, context)),
        wholeClass,
      );
      assert.equal(perProperty !== 'accepted', rejected, `expected ${label} to be ${rejected ? 'rejected' : 'accepted'}`);
      if (perProperty !== 'accepted') {
        assert.equal(perProperty.code, 'INVALID_STATE');
        assert.match(perProperty.message, /^Step 'A\.s1' of run 'upd-run' produced an invalid state: .*\. Nothing was recorded: return values the state class accepts\.$/);
      }
    });
  }
});

let counted = 0;

@ValidatorConstraint({ name: 'counted' })
class Counted implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    counted += 1;
    return typeof value === 'string';
  }
}

/** 50 required properties, each with a validator that counts its calls. */
const CountedState = (() => {
  class CountedState {}
  for (let i = 0; i < 50; i++) Validate(Counted)(CountedState.prototype, `p${i}`);
  return CountedState;
})();

describe('validateUpdate: cost follows the update, not the state class', () => {
  it('runs the validators of the properties the update sets, and no other', () => {
    counted = 0;
    validateUpdate(CountedState, { p7: 'seven' }, context);
    assert.equal(counted, 1, 'one property set: one validator call, not one per property of the class');
    counted = 0;
    validateUpdate(CountedState, { p1: 'one', p2: 'two', unknown: 3 }, context);
    assert.equal(counted, 2);
  });

  it('does not report an invalid value the update does not touch (it was checked when it was set or loaded)', () => {
    // The state holds p0: 5 (invalid); the step sets p1 only. validateUpdate sees the update alone.
    counted = 0;
    assert.doesNotThrow(() => validateUpdate(CountedState, { p1: 'fine' }, context));
    assert.throws(
      () => validateUpdate(CountedState, { p1: 'fine', p0: 5 }, context),
      (e: unknown) => e instanceof InvalidStateError && e.issues.length === 1 && e.issues[0].property === 'p0',
    );
  });
});

/** WideState's rules without any class-transformer metadata: validateUpdate builds the instance without class-transformer. */
class PlainWideState {
  @IsString() title!: string;
  @IsOptional() @IsInt() @Min(0) count?: number;
  @IsOptional() @ValidateNested() home?: Address;
  @IsOptional() @IsString({ each: true }) tags?: string[];
  @IsDefined() must!: string;
  @IsOptional() @Validate(IsEven) even?: number;
  @ValidateIf((o: { count?: number }) => o.count !== undefined && o.count > 10) @IsString() reason?: string;
  plain?: unknown;
}

class WithAccessor {
  @IsOptional() @IsString() name?: string;
  get upper(): string {
    return (this.name ?? '').toUpperCase();
  }
}

const plainCases: [label: string, update: Record<string, unknown>, rejected: boolean][] = [
  ['a valid update', { title: 'new title', count: 2 }, false],
  ['a wrong type', { count: 'three' }, true],
  ['two invalid properties, given in reverse rule order', { must: 5, count: -1, title: 5 }, true],
  ['a nested plain object typed by design:type', { home: { city: 'Paris', zip: '1' } }, true],
  ['a nested object that is valid', { home: { city: 'Paris', zip: '75001' } }, false],
  ['an array with an item of the wrong type (each)', { tags: ['a', 3] }, true],
  ['a required property set to undefined', { title: undefined }, true],
  ['an @IsDefined property set to undefined', { must: undefined }, true],
  ['a value a custom validator refuses', { even: 3 }, true],
  ['a conditional rule whose condition holds in the update', { count: 11, reason: 7 }, true],
  ['a conditional rule whose condition does not hold', { count: 1, reason: 7 }, false],
  ['an unknown property beside an invalid one', { whatever: 1, count: 'x' }, true],
  ['an own "__proto__" key beside an invalid one', { ...JSON.parse('{"__proto__": {"x": 1}}'), count: 'x' }, true],
];

describe('validateUpdate without class-transformer (a state class with no class-transformer metadata)', () => {
  it('skips class-transformer only for classes it would merely copy onto', () => {
    assert.equal(propertyPlan(PlainWideState).plainCopy, true);
    assert.equal(propertyPlan(WideState).plainCopy, false, '@Type on a property: class-transformer builds the instance');
    assert.equal(propertyPlan(WithAccessor).plainCopy, false, 'an accessor: class-transformer skips it, so it is used');
  });

  for (const [label, update, rejected] of plainCases) {
    it(`${rejected ? 'rejects' : 'accepts'} ${label} with the error whole-class validation gives`, () => {
      const perProperty = outcome(() => validateUpdate(PlainWideState, update, context));
      const wholeClass = outcome(() => validateWholeClass(PlainWideState, { ...base, ...update }, context));
      assert.deepEqual(perProperty, wholeClass);
      assert.deepEqual(
        outcome(() => validateState(PlainWideState, { ...base, ...update }, context)),
        wholeClass,
        'validateState per property',
      );
      assert.equal(perProperty !== 'accepted', rejected, `expected ${label} to be ${rejected ? 'rejected' : 'accepted'}`);
      if (perProperty !== 'accepted') assert.equal(perProperty.code, 'INVALID_STATE');
    });
  }

  it('validateState reports properties the state lacks, and nested ones, as whole-class validation does', () => {
    for (const state of [{}, { title: 'x' }, { title: 'x', must: 'y', home: { city: 3, zip: '1' }, count: 11 }, { title: 'x', must: 'y', plain: { anything: 1 } }]) {
      const wholeClass = outcome(() => validateWholeClass(PlainWideState, state, context));
      assert.deepEqual(
        outcome(() => validateState(PlainWideState, state, context)),
        wholeClass,
        JSON.stringify(state),
      );
    }
    const missing = outcome(() => validateState(PlainWideState, {}, context));
    assert.ok(missing !== 'accepted' && (missing.issues as { property: string }[]).map((i) => i.property).join() === 'title,must', 'the two required properties, in rule order');
  });

  it('does not change the update it validates', () => {
    const update = { home: { city: 'Paris', zip: '75001' }, tags: ['a'] };
    const before = JSON.stringify(update);
    validateUpdate(PlainWideState, update, context);
    assert.equal(JSON.stringify(update), before);
    assert.equal(Object.getPrototypeOf(update.home), Object.prototype, 'the nested value stays a plain object');
  });
});

@ValidatorConstraint({ name: 'laterYes', async: true })
class LaterYes implements ValidatorConstraintInterface {
  validate(): Promise<boolean> {
    return Promise.resolve(false);
  }
}

@ValidatorConstraint({ name: 'promisesAnyway' })
class PromisesAnyway implements ValidatorConstraintInterface {
  validate(): Promise<boolean> {
    return Promise.resolve(false);
  }
}

@ValidatorConstraint({ name: 'truthyText' })
class TruthyText implements ValidatorConstraintInterface {
  // A JavaScript validator may answer any value: class-validator tests it for truthiness.
  validate(value: unknown): boolean {
    return (typeof value === 'string' ? value : 0) as unknown as boolean;
  }
  defaultMessage(): string {
    return '$property must be a non-empty string';
  }
}

/** Rules `passes` (the quick check before class-validator's executor) must answer exactly as the executor does. */
class QuickState {
  @IsOptional() @IsString({ each: true }) labels?: Set<unknown>;
  @IsOptional() @IsInt({ each: true }) scores?: Map<string, unknown>;
  @IsOptional() @Validate(LaterYes) later?: unknown;
  @IsOptional() @Validate(PromisesAnyway) promised?: unknown;
  @IsOptional() @Validate(TruthyText) text?: unknown;
  @IsOptional() @IsString({ validateIf: (o: { strict?: boolean }) => o.strict === true }) loose?: unknown;
  @IsOptional() strict?: boolean;
  @IsOptional() @ValidateNested() home?: Address;
}

const quickCases: [label: string, update: Record<string, unknown>, rejected: boolean][] = [
  ['a Set whose items all pass (each)', { labels: new Set(['a', 'b']) }, false],
  ['a Set with an item of the wrong type (each)', { labels: new Set(['a', 2]) }, true],
  ['a Map whose values all pass (each)', { scores: new Map([['a', 1]]) }, false],
  [
    'a Map with a value of the wrong type (each)',
    {
      scores: new Map<string, unknown>([
        ['a', 1],
        ['b', 'x'],
      ]),
    },
    true,
  ],
  ['a value only an async validator would refuse (validateSync ignores it)', { later: 1 }, false],
  ['a validator not declared async that answers with a promise', { promised: 1 }, false],
  ['a validator answering a truthy non-boolean', { text: 'yes' }, false],
  ['a validator answering a falsy non-boolean', { text: 5 }, true],
  ["a rule's own validateIf that does not hold", { loose: 5 }, false],
  ["a rule's own validateIf that holds", { strict: true, loose: 5 }, true],
];

describe('validateUpdate: the quick check before the executor', () => {
  it('is prepared for properties with condition, defined and custom rules only', () => {
    const plan = propertyPlan(QuickState);
    assert.notEqual(plan.rules.get('labels')!.quick, null);
    assert.notEqual(plan.rules.get('text')!.quick, null);
    assert.equal(plan.rules.get('home')!.quick, null, 'nested validation is left to the executor');
    assert.equal(plan.rules.get('later')!.quick!.checks[0].validators.length, 0, 'an async validator is not run (validateSync ignores it)');
  });

  /** The same plan with the quick check off: class-validator's executor alone decides. */
  const executorOnly = (update: Record<string, unknown>) => {
    const plan = propertyPlan(QuickState);
    const slow = { ...plan, rules: new Map([...plan.rules].map(([k, r]) => [k, { ...r, quick: null }])) };
    const instance = Object.assign(new QuickState(), update);
    return validateProperties(slow, instance, Object.keys(update), propertyExecutor()!);
  };

  for (const [label, update, rejected] of quickCases) {
    it(`${rejected ? 'rejects' : 'accepts'} ${label}, as the executor alone does`, () => {
      const quick = outcome(() => validateUpdate(QuickState, update, context));
      const errors = executorOnly(update);
      assert.equal(quick !== 'accepted', errors.length > 0);
      if (quick !== 'accepted') assert.deepEqual((quick.issues as { property: string }[]).map((i) => i.property).sort(), errors.map((e) => e.property).sort());
      assert.equal(quick !== 'accepted', rejected, `expected ${label} to be ${rejected ? 'rejected' : 'accepted'}`);
    });
  }
});
