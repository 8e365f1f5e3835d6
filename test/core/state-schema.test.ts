import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { IsInt, IsOptional, IsString, Matches, Min, ValidateNested } from 'class-validator';
import { InvalidStateError } from '../../src/index';
import { createState, validateState } from '../../src/core/state/state-schema';
import { StateFrame } from '../../src/core/state/state-frame';

class Address {
  @IsString() city!: string;
  @Matches(/^\d{5}$/) zip!: string;
}

class ProfileState {
  @IsString() name!: string;
  @IsInt() @Min(0) count = 0;
  tags: string[] = [];
  @IsOptional() @ValidateNested() address?: Address;
}

const where = { runId: 'state-run' };

function address(city: unknown, zip: unknown): Address {
  return Object.assign(new Address(), { city, zip });
}

describe('createState', () => {
  it('applies the state class defaults, overwritten by the input, as a frozen class instance', () => {
    const state = createState(ProfileState, { name: 'ada', count: 3 }, where) as unknown as ProfileState;
    assert.ok(state instanceof ProfileState);
    assert.equal(state.name, 'ada');
    assert.equal(state.count, 3);
    assert.deepEqual(state.tags, []);
    assert.ok(Object.isFrozen(state));
    assert.ok(Object.isFrozen(state.tags));
    const defaults = createState(ProfileState, { name: 'bob' }, where) as unknown as ProfileState;
    assert.equal(defaults.count, 0);
  });

  it('without a state class copies the input into a frozen plain object', () => {
    const input = { a: 1, nested: { b: 2 } };
    const state = createState(undefined, input, where);
    assert.notEqual(state, input);
    assert.deepEqual(state, input);
    assert.ok(Object.isFrozen(state));
  });

  for (const [label, input, fragment] of [
    ['null', null, 'got null'],
    ['an array', [1, 2], 'got an array'],
    ['a string', 'text', 'got string'],
    ['a number', 5, 'got number'],
    ['undefined', undefined, 'got undefined'],
  ] as const) {
    it(`rejects ${label} as input with INVALID_STATE naming the run`, () => {
      assert.throws(
        () => createState(ProfileState, input, where),
        (err: unknown) => {
          assert.ok(err instanceof InvalidStateError);
          assert.equal(err.code, 'INVALID_STATE');
          assert.equal(err.runId, 'state-run');
          assert.deepEqual(err.issues, []);
          assert.ok(err.message.includes("run 'state-run'"), err.message);
          assert.ok(err.message.includes('must be an object'), err.message);
          assert.ok(err.message.includes(fragment), err.message);
          return true;
        },
      );
    });
  }

  it("does not freeze or alias the caller's input objects", () => {
    const input = { name: 'ada', tags: ['a'] };
    createState(ProfileState, input, where);
    assert.ok(!Object.isFrozen(input.tags), "createState froze the caller's input.tags array");
    input.tags.push('b'); // the caller still owns its input
    assert.deepEqual(input.tags, ['a', 'b']);
  });

  it('an own "__proto__" key in the input cannot replace the state prototype (and so skip validation)', () => {
    const input = JSON.parse('{"__proto__":{"isAdmin":true},"name":42}') as Record<string, unknown>;
    const state = createState(ProfileState, input, where);
    assert.equal((state as Record<string, unknown>).isAdmin, undefined, 'the input set the state prototype');
    assert.ok(state instanceof ProfileState, 'the state lost its class');
    assert.throws(
      () => validateState(ProfileState, state, { runId: 'state-run', phase: 'in the input' }),
      (err: InvalidStateError) => err.issues.some((i) => i.property === 'name'),
    );
  });
});

describe('validateState', () => {
  it('accepts a valid state and is a no-op without a state class', () => {
    validateState(ProfileState, createState(ProfileState, { name: 'ok', address: address('Paris', '75001') }, where), { runId: 'state-run', phase: 'in the input' });
    validateState(undefined, createState(undefined, { anything: 'x' }, where), { runId: 'state-run', phase: 'in the input' });
  });

  it('lists every failing property, nested ones with their path', () => {
    const state = createState(ProfileState, { name: 7, count: -1, address: address(99, 'abc') }, where);
    assert.throws(
      () => validateState(ProfileState, state, { runId: 'state-run', step: 'Agent/enrich', phase: 'produced' }),
      (err: unknown) => {
        assert.ok(err instanceof InvalidStateError);
        assert.equal(err.code, 'INVALID_STATE');
        assert.equal(err.runId, 'state-run');
        assert.equal(err.step, 'Agent/enrich');
        assert.deepEqual(err.issues.map((i) => i.property).sort(), ['address.city', 'address.zip', 'count', 'name']);
        const zip = err.issues.find((i) => i.property === 'address.zip')!;
        assert.ok(Object.keys(zip.constraints).includes('matches'));
        assert.ok(err.message.includes("run 'state-run'"), err.message);
        assert.ok(err.message.startsWith("Step 'Agent/enrich' of run 'state-run' produced an invalid state: "), err.message);
        assert.ok(err.message.includes('address.zip'), err.message);
        return true;
      },
    );
  });

  it('also validates nested objects of a state rebuilt from plain data (as loaded from storage)', () => {
    // What the runtime validates after a step or on resume: the input and outputs come back from the
    // serializer as plain objects, never as Address instances.
    const plain = JSON.parse(JSON.stringify({ name: 'ok', address: { city: 'Paris', zip: 'bad' } })) as Record<string, unknown>;
    const state = createState(ProfileState, plain, where);
    assert.throws(
      () => validateState(ProfileState, state, { runId: 'state-run', phase: 'loaded from the store' }),
      (err: InvalidStateError) => err.issues.some((i) => i.property === 'address.zip'),
      'a plain nested object bypasses @ValidateNested',
    );
  });
});

type Item = { text: string; tags: string[] };
const item = (text: string): Item => ({ text, tags: [text] });

/** Every value reachable from `value` is frozen. */
function assertDeepFrozen(value: unknown, path = '$'): void {
  if (value === null || typeof value !== 'object') return;
  assert.ok(Object.isFrozen(value), `${path} is not frozen`);
  for (const [key, child] of Object.entries(value)) assertDeepFrozen(child, `${path}.${key}`);
}

describe('StateFrame: the state a reducer builds stays immutable', () => {
  const concat = { items: (current: Item[] | undefined, update: Item[]) => (current ?? []).concat(update) };

  it('a list growing through a concat reducer is frozen to the bottom at every step (the root frame)', () => {
    const frame = new StateFrame({}, concat, false);
    for (let i = 0; i < 50; i++) {
      frame.apply({ items: [item(`i${i}`)] });
      assertDeepFrozen(frame.view.items);
    }
    const items = frame.view.items as Item[];
    assert.equal(items.length, 50);
    assert.throws(() => (items as unknown as unknown[]).push(item('x')), TypeError);
    assert.throws(() => items[10].tags.push('x'), TypeError);
    assert.throws(() => {
      items[49].text = 'changed';
    }, TypeError);
  });

  it('items a reducer creates or replaces (not only appends) are frozen too', () => {
    const wrap = { items: (current: Item[] | undefined, update: Item[]) => [...(current ?? []).map((x) => ({ ...x, tags: [...x.tags, 'seen'] })), ...update] };
    const frame = new StateFrame({}, wrap, false);
    for (let i = 0; i < 5; i++) frame.apply({ items: [item(`i${i}`)] });
    assertDeepFrozen(frame.view.items);
    // A reducer that keeps the list's items but puts a new, unfrozen one in the middle.
    const insert = {
      items: (current: Item[] | undefined, update: Item[]) => [...(current ?? []).slice(0, 1), { text: 'new', tags: ['n'] }, ...(current ?? []).slice(1), ...update],
    };
    const other = new StateFrame({}, insert, false);
    for (let i = 0; i < 5; i++) other.apply({ items: [item(`i${i}`)] });
    assertDeepFrozen(other.view.items);
  });

  it('a list the reducer froze itself (shallowly) still gets its items frozen', () => {
    const shallow = { items: (current: Item[] | undefined, update: Item[]) => Object.freeze([...(current ?? []), ...update, { text: 'extra', tags: [] }]) };
    const frame = new StateFrame({}, shallow, false);
    for (let i = 0; i < 3; i++) frame.apply({ items: [item(`i${i}`)] });
    assertDeepFrozen(frame.view.items);
  });

  it('a forked frame keeps its own changes, combined through the reducer; the root frame keeps none', () => {
    const root = new StateFrame({}, concat, false);
    root.apply({ items: [item('a')], title: 'x' });
    const branch = root.fork();
    branch.apply({ items: [item('b')] });
    branch.apply({ items: [item('c')], title: 'y' });
    assert.deepEqual(branch.changes(), { items: [item('b'), item('c')], title: 'y' });
    assertDeepFrozen(branch.changes().items);
    assert.deepEqual(
      (branch.view.items as Item[]).map((x) => x.text),
      ['a', 'b', 'c'],
    );
    assert.throws(() => root.changes());
  });
});
