import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { assertStorableDepth, serialize, sha256 } from '../../src/core/state/serializer';
import { deserialize, MAX_VALUE_DEPTH } from '../../src/core/state/value-decoder';
import { SerializationError, UndecodableValueError } from '../../src/contract/errors';

const arrays = (levels: number, leaf: unknown = 1): unknown => {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
};
const refused = (fragment: string) => (err: unknown) =>
  err instanceof SerializationError && !(err instanceof UndecodableValueError) && err.code === 'UNSERIALIZABLE_VALUE' && err.message.includes(fragment);
const unreadable = (fragment: string) => (err: unknown) => err instanceof UndecodableValueError && err.code === 'UNSERIALIZABLE_VALUE' && err.message.includes(fragment);

describe('serializer: the depth limit counts stored JSON levels', () => {
  it('accepts exactly MAX_VALUE_DEPTH levels of arrays and objects, and refuses one more with the path', () => {
    assert.deepStrictEqual(deserialize(serialize(arrays(MAX_VALUE_DEPTH))), arrays(MAX_VALUE_DEPTH));
    assert.throws(() => serialize(arrays(MAX_VALUE_DEPTH + 1), { runId: 'r', step: 'A/b', what: 'output' }), refused("output of step 'A/b' of run 'r' at $[0][0]"));
    let objects: unknown = 1;
    for (let i = 0; i < MAX_VALUE_DEPTH + 1; i++) objects = { a: objects };
    assert.throws(() => serialize(objects), refused(`$.a.a.a.a.a.a.a.a…(${MAX_VALUE_DEPTH - 16} more levels)…`));
  });

  it('counts a Map as three levels and a Set as two (their stored form); a Date or bytes as none', () => {
    const maps = (n: number) => {
      let value: unknown = 1;
      for (let i = 0; i < n; i++) value = new Map([['k', value]]);
      return value;
    };
    const sets = (n: number) => {
      let value: unknown = 1;
      for (let i = 0; i < n; i++) value = new Set([value]);
      return value;
    };
    assert.deepStrictEqual(deserialize(serialize(maps(333))), maps(333));
    assert.throws(() => serialize(maps(334)), refused('<value 0>'));
    assert.deepStrictEqual(deserialize(serialize(sets(500))), sets(500));
    assert.throws(() => serialize(sets(501)), refused('<item 0>'));
    const leaf = arrays(MAX_VALUE_DEPTH - 1, { at: new Date(0), bytes: new Uint8Array([1]), big: 1n, nan: NaN });
    assert.deepStrictEqual(deserialize(serialize(leaf)), leaf);
  });

  it('lets the runtime wrap a value at the limit (a base snapshot), and reads that back', () => {
    const state = arrays(MAX_VALUE_DEPTH);
    assert.throws(() => serialize({ state }), refused('$.state'));
    const text = serialize({ state }, { what: 'base snapshot', wrapping: 1 });
    assert.deepStrictEqual(deserialize(text), { state });
  });

  it('refuses to read a stored value deeper than any this release writes, bad JSON and malformed tags, typed', () => {
    const deep = `${'['.repeat(50_000)}${']'.repeat(50_000)}`;
    assert.throws(() => deserialize(deep), unreadable('nested deeper than 1000 levels'));
    assert.throws(() => deserialize('{"a":'), unreadable('not valid JSON'));
    assert.throws(() => deserialize('{"$wp":"map","v":3}'), unreadable('malformed'));
    assert.throws(() => deserialize('{"$wp":"bigint","v":"x"}'), unreadable('malformed'));
  });

  it('assertStorableDepth refuses without recursion what serialize refuses, and passes what it passes', () => {
    assert.throws(() => assertStorableDepth({ tree: arrays(200_000) }, { runId: 'r', what: 'input' }), refused("input of run 'r' at $.tree[0]"));
    assertStorableDepth({ tree: arrays(MAX_VALUE_DEPTH - 1) });
    // A value shared by many parents (2^60 paths) is walked once per level it is met at.
    let shared: unknown = 1;
    for (let i = 0; i < 60; i++) shared = [shared, shared];
    assertStorableDepth(shared);
    const cycle: Record<string, unknown> = {};
    cycle.self = { back: cycle };
    assert.throws(() => assertStorableDepth(cycle), refused('circular reference'));
  });
});

describe('serializer: -0', () => {
  it('writes -0 as a num tag that every release reads back as -0, and every other number as before', () => {
    assert.equal(serialize({ a: -0, b: [0, -0] }), '{"a":{"$wp":"num","v":"-0"},"b":[0,{"$wp":"num","v":"-0"}]}');
    assert.ok(Object.is(deserialize<{ a: number }>(serialize({ a: -0 })).a, -0));
    // The previous release decoded a 'num' tag as Number(v): the same -0.
    assert.ok(Object.is(Number((JSON.parse(serialize(-0)) as { v: string }).v), -0));
    // Values without -0 are the same bytes, so the same SHA-256, as the previous release wrote and sealed.
    const plain = { a: 0, b: [1.5, -1, 1e21], c: 'x' };
    assert.equal(serialize(plain), '{"a":0,"b":[1.5,-1,1e+21],"c":"x"}');
    assert.equal(sha256(serialize(plain)), sha256('{"a":0,"b":[1.5,-1,1e+21],"c":"x"}'));
  });
});
