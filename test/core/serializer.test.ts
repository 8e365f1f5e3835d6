import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { serializeCopy, serializeLegacyForm } from '../../src/core/state/serializer';
import { serialize, deserialize, SerializationError } from '../../src/index';

const roundTrip = <T>(value: T): T => deserialize<T>(serialize(value));

function unserializable(path: string, ...fragments: string[]) {
  return (err: unknown) => {
    assert.ok(err instanceof SerializationError, `expected SerializationError, got ${String(err)}`);
    assert.equal(err.code, 'UNSERIALIZABLE_VALUE');
    assert.equal(err.path, path);
    assert.ok(err.message.includes(` at ${path}`), `message ${JSON.stringify(err.message)} lacks the path ${path}`);
    for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
    return true;
  };
}

describe('serializer round trips', () => {
  it('plain JSON values', () => {
    const value = { s: 'text', n: 42.5, neg: -3, t: true, f: false, nil: null, list: [1, 'two', { three: [3] }], empty: {}, none: [] };
    assert.deepStrictEqual(roundTrip(value), value);
    for (const scalar of ['x', 0, 1.25, true, null]) assert.deepStrictEqual(roundTrip(scalar), scalar);
  });

  it('Date', () => {
    const back = roundTrip({ at: new Date(Date.UTC(2024, 1, 29, 12, 30, 15, 123)) });
    assert.ok(back.at instanceof Date);
    assert.equal(back.at.toISOString(), '2024-02-29T12:30:15.123Z');
  });

  it('Map with non-string keys, keeping key types and order', () => {
    const objKey = { id: 1 };
    const map = new Map<unknown, unknown>([
      [1, 'number'],
      ['1', 'string'],
      [objKey, 'object'],
      [2n, 'bigint'],
      [new Date(5), 'date'],
      [null, 'null'],
    ]);
    const back = roundTrip(map);
    assert.ok(back instanceof Map);
    assert.deepStrictEqual(back, map);
    const keys = [...back.keys()];
    assert.equal(keys[0], 1);
    assert.equal(keys[1], '1');
    assert.equal(typeof keys[3], 'bigint');
    assert.ok(keys[4] instanceof Date);
  });

  it('Set', () => {
    const set = new Set<unknown>([1, '1', 3n, { a: 1 }]);
    const back = roundTrip(set);
    assert.ok(back instanceof Set);
    assert.deepStrictEqual(back, set);
  });

  it('BigInt, including negative and beyond 2^64', () => {
    const value = { big: 2n ** 70n + 1n, neg: -12345678901234567890n, zero: 0n };
    assert.deepStrictEqual(roundTrip(value), value);
  });

  it('Uint8Array and Buffer (as bytes), including a view at an offset', () => {
    const bytes = new Uint8Array([0, 1, 127, 128, 255]);
    const backBytes = roundTrip(bytes);
    assert.ok(backBytes instanceof Uint8Array);
    assert.deepEqual([...backBytes], [0, 1, 127, 128, 255]);
    const backBuffer = roundTrip(Buffer.from('héllo', 'utf8'));
    assert.ok(backBuffer instanceof Uint8Array);
    assert.equal(Buffer.from(backBuffer).toString('utf8'), 'héllo');
    const view = new Uint8Array([9, 8, 7, 6, 5]).subarray(1, 3);
    assert.deepEqual([...roundTrip(view)], [8, 7]);
  });

  it('holes in arrays (kept as holes, length kept), apart from undefined and null', () => {
    const back = roundTrip([1, , 3, undefined, null, ,]);
    assert.equal(back.length, 6);
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5].map((i) => i in back),
      [true, false, true, true, true, false],
    );
    assert.equal(back[3], undefined);
    assert.equal(back[4], null);
    assert.deepStrictEqual(roundTrip(new Array(3)), new Array(3));
  });

  it('undefined inside arrays (kept, index preserved) and at the top level', () => {
    const back = roundTrip([1, undefined, 3]);
    assert.equal(back.length, 3);
    assert.ok(1 in back);
    assert.equal(back[1], undefined);
    assert.equal(back[2], 3);
    assert.equal(roundTrip(undefined), undefined);
  });

  it('NaN, Infinity and -Infinity', () => {
    const back = roundTrip({ nan: Number.NaN, inf: Number.POSITIVE_INFINITY, ninf: Number.NEGATIVE_INFINITY, list: [Number.NaN] });
    assert.ok(Number.isNaN(back.nan));
    assert.equal(back.inf, Number.POSITIVE_INFINITY);
    assert.equal(back.ninf, Number.NEGATIVE_INFINITY);
    assert.ok(Number.isNaN(back.list[0]));
  });

  it('nested combinations', () => {
    const value = {
      runs: new Map<string, unknown>([
        ['a', new Set([new Date(0), [undefined, Number.NaN, 7n]])],
        ['b', { bytes: new Uint8Array([1, 2]), when: new Date(1000), nested: new Map([[1n, new Set(['x'])]]) }],
      ]),
      list: [{ m: new Map() }, new Set(), -Infinity],
    };
    assert.deepStrictEqual(roundTrip(value), value);
  });

  it('shared (non-circular) references are accepted', () => {
    const shared = { x: 1 };
    assert.deepStrictEqual(roundTrip({ a: shared, b: shared, list: [shared, shared] }), { a: { x: 1 }, b: { x: 1 }, list: [{ x: 1 }, { x: 1 }] });
  });

  it('objects without a prototype', () => {
    const bare = Object.create(null) as Record<string, unknown>;
    bare.k = 'v';
    assert.deepEqual({ ...roundTrip(bare) }, { k: 'v' });
  });
});

describe("serializer escapes user objects that look like tags ('$wp')", () => {
  it('an object with a $wp key that mimics a tag stays a plain object', () => {
    const mimic = { $wp: 'date', v: '2020-01-01T00:00:00.000Z' };
    const back = roundTrip(mimic);
    assert.ok(!(back instanceof Date));
    assert.deepStrictEqual(back, mimic);
  });

  it('unknown tag names, nested $wp objects, and $wp objects inside arrays and maps', () => {
    const value = {
      a: { $wp: 'bogus' },
      b: { $wp: { $wp: 'undef' } },
      c: [{ $wp: 'num', v: 'NaN' }],
      d: new Map([
        [
          { $wp: 'set', v: [] },
          { $wp: 'bigint', v: '1' },
        ],
      ]),
      e: { $wp: 'obj', v: { x: 1 } },
    };
    assert.deepStrictEqual(roundTrip(value), value);
    assert.deepStrictEqual(roundTrip({ $wp: 1 }), { $wp: 1 });
  });

  it('reads text written by earlier releases as it did (a hole then was written as null)', () => {
    const old =
      '{"at":{"$wp":"date","v":"1970-01-01T00:00:00.000Z"},"b":{"$wp":"bytes","v":"AP8="},"big":{"$wp":"bigint","v":"-5"},' +
      '"holed":[1,null,3],"list":[{"$wp":"undef"}],"m":{"$wp":"map","v":[[{"$wp":"num","v":"NaN"},{"$wp":"set","v":[{"$wp":"num","v":"-Infinity"}]}]]},' +
      '"mimic":{"$wp":"obj","v":{"$wp":"undef"}}}';
    const back = deserialize(old);
    assert.deepStrictEqual(back, {
      at: new Date(0),
      b: new Uint8Array([0, 255]),
      big: -5n,
      holed: [1, null, 3],
      list: [undefined],
      m: new Map([[Number.NaN, new Set([-Infinity])]]),
      mimic: { $wp: 'undef' },
    });
  });

  it('refuses a hole tag outside an array on decode (a corrupted row), typed', () => {
    for (const text of ['{"$wp":"hole"}', '{"a":{"$wp":"hole"}}', '{"$wp":"set","v":[{"$wp":"hole"}]}', '{"$wp":"map","v":[[1,{"$wp":"hole"}]]}']) {
      assert.throws(
        () => deserialize(text),
        (err: SerializationError) => err.code === 'UNSERIALIZABLE_VALUE' && err.message.includes('hole'),
        text,
      );
    }
  });

  it('refuses an unknown tag on decode with a SerializationError', () => {
    assert.throws(
      () => deserialize('{"$wp":"from-the-future","v":1}'),
      (err: SerializationError) => err.code === 'UNSERIALIZABLE_VALUE' && err.message.includes('from-the-future'),
    );
  });
});

describe("serializer and '__proto__' keys", () => {
  it('a stored "__proto__" key stays data and pollutes no prototype', () => {
    const back = deserialize<Record<string, unknown>>('{"__proto__":{"polluted":true},"a":1,"nested":{"__proto__":{"polluted":true}}}');
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(Object.getPrototypeOf(back), Object.prototype);
    assert.equal(back.polluted, undefined);
    assert.ok(Object.prototype.hasOwnProperty.call(back, '__proto__'));
    assert.deepEqual(Object.getOwnPropertyDescriptor(back, '__proto__')!.value, { polluted: true });
    const nested = back.nested as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(nested), Object.prototype);
    assert.equal(nested.polluted, undefined);
  });

  it('a tagged "obj" payload with "__proto__" cannot pollute either', () => {
    const back = deserialize<Record<string, unknown>>('{"$wp":"obj","v":{"$wp":"x","__proto__":{"polluted":true}}}');
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(back.polluted, undefined);
    assert.equal(back.$wp, 'x');
  });

  it('serializing an object with an own "__proto__" key (e.g. from JSON.parse) pollutes nothing', () => {
    const input = JSON.parse('{"__proto__":{"polluted":true},"a":1}') as Record<string, unknown>;
    serialize(input);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  it('an own "__proto__" key survives a round trip (no silent data loss)', () => {
    // JSON.parse (an LLM answer, an API body) produces own "__proto__" keys; the serializer must not drop them.
    const input = JSON.parse('{"__proto__":{"x":1},"a":2}') as Record<string, unknown>;
    const back = roundTrip(input);
    assert.ok(Object.prototype.hasOwnProperty.call(back, '__proto__'), `"__proto__" was dropped: ${serialize(input)}`);
    assert.deepEqual(Object.getOwnPropertyDescriptor(back, '__proto__')!.value, { x: 1 });
    assert.equal(back.a, 2);
  });
});

describe('serializer canonical output', () => {
  it('equal objects with different key order serialize identically, keys sorted', () => {
    const one = serialize({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: 2 } });
    const two = serialize({ a: { c: 2, d: [1, { y: 2, z: 1 }] }, b: 1 });
    assert.equal(one, two);
    assert.equal(one, '{"a":{"c":2,"d":[1,{"y":2,"z":1}]},"b":1}');
  });

  it('an undefined property reads as an absent one', () => {
    assert.equal(serialize({ a: undefined, b: 1 }), serialize({ b: 1 }));
  });

  it('a hole is tagged, and an array without one is written as before', () => {
    assert.equal(serialize([1, , 3]), '[1,{"$wp":"hole"},3]');
    assert.equal(serialize([1, undefined, 3]), '[1,{"$wp":"undef"},3]');
    assert.equal(serialize([1, null, 3]), '[1,null,3]');
    // The form earlier releases wrote, for hashes and inputs compared with theirs.
    assert.equal(serializeLegacyForm({ list: [1, , 3] }), '{"list":[1,null,3]}');
  });

  it('a data-class instance serializes like the equivalent plain object', () => {
    class Point {
      y = 2;
      x = 1;
    }
    assert.equal(serialize(new Point()), serialize({ x: 1, y: 2 }));
  });
});

describe('serializer refuses what it cannot revive, naming the path', () => {
  it('a function', () => {
    assert.throws(() => serialize({ a: { fn: () => 1 } }), unserializable('$.a.fn', 'function'));
  });

  it('a symbol (in an array)', () => {
    assert.throws(() => serialize({ list: [1, Symbol('s')] }), unserializable('$.list[1]', 'symbol'));
  });

  it('a class instance with methods, naming the class', () => {
    class Client {
      url = 'http://x';
      call() {
        return this.url;
      }
    }
    assert.throws(() => serialize({ deps: { client: new Client() } }), unserializable('$.deps.client', 'Client'));
  });

  it('a class instance with a getter', () => {
    class WithGetter {
      _v = 1;
      get v() {
        return this._v;
      }
    }
    assert.throws(() => serialize({ g: new WithGetter() }), unserializable('$.g', 'WithGetter'));
  });

  it('a class instance whose methods are inherited', () => {
    class Base {
      hello() {
        return 'hi';
      }
    }
    class Sub extends Base {
      n = 1;
    }
    assert.throws(() => serialize([new Sub()]), unserializable('$[0]', 'Sub'));
  });

  it('a circular reference (object and array)', () => {
    const a: Record<string, unknown> = { name: 'a' };
    a.self = a;
    assert.throws(() => serialize({ root: a }), unserializable('$.root.self', 'circular'));
    const list: unknown[] = [1];
    list.push({ back: list });
    assert.throws(() => serialize(list), unserializable('$[1].back', 'circular'));
  });

  it('an invalid Date', () => {
    assert.throws(() => serialize({ when: new Date('not a date') }), unserializable('$.when', 'invalid Date'));
  });

  it('an unserializable Map key or value', () => {
    assert.throws(() => serialize({ m: new Map([[() => 1, 'v']]) }), unserializable('$.m<key 0>', 'function'));
    assert.throws(() => serialize({ m: new Map([['k', Symbol('v')]]) }), unserializable('$.m<value 0>', 'symbol'));
  });

  it('names run, step and what in the message when given', () => {
    assert.throws(
      () => serialize({ fn: () => 1 }, { runId: 'run-7', step: 'Agent/step', what: 'output' }),
      (err: SerializationError) => {
        assert.equal(err.code, 'UNSERIALIZABLE_VALUE');
        assert.equal(err.runId, 'run-7');
        assert.equal(err.step, 'Agent/step');
        assert.ok(err.message.includes("Cannot serialize output of step 'Agent/step' of run 'run-7' at $.fn"), err.message);
        return true;
      },
    );
  });

  it('accepts data-only class instances (fields only) as plain data', () => {
    class Dto {
      name = 'n';
      tags = ['a'];
      when = new Date(0);
    }
    class SubDto extends Dto {
      extra = 1;
    }
    const back = roundTrip({ dto: new Dto(), sub: new SubDto() });
    assert.deepStrictEqual(back.dto, { name: 'n', tags: ['a'], when: new Date(0) });
    assert.deepStrictEqual(back.sub, { name: 'n', tags: ['a'], when: new Date(0), extra: 1 });
  });
});

describe('serializeCopy: the text and the decoded copy in one pass', () => {
  class Dto {
    name = 'n';
  }
  const values: [label: string, value: unknown][] = [
    ['plain JSON (no tag: the encoded tree is the copy)', { b: 1, a: [2, { d: 'x', c: null }], zero: 0, skip: undefined }],
    ['-0 (tagged: JSON would write it as 0)', { neg: -0, list: [-0, 0] }],
    ['a data class instance', { dto: new Dto() }],
    ['an own "__proto__" key', JSON.parse('{"__proto__": {"x": 1}, "y": 2}')],
    ['a Date', { at: new Date(0) }],
    ['a Map, a Set and a bigint', { m: new Map([['k', 1]]), s: new Set([1n]) }],
    ['undefined in an array and NaN', { list: [undefined, 1], n: NaN }],
    ['an object with a "$wp" key', { $wp: 'mine', v: 1 }],
    ['a sparse array', { list: [1, , 3] }],
  ];
  for (const [label, value] of values) {
    it(`gives serialize's text and deserialize's value: ${label}`, () => {
      const { text, copy } = serializeCopy<object>(value);
      assert.equal(text, serialize(value));
      assert.deepStrictEqual(copy, deserialize(text));
      assert.deepStrictEqual(Object.keys(copy), Object.keys(deserialize<object>(text)), 'same keys in the same (sorted) order');
    });
  }

  it('shares no object or array with the value it copies', () => {
    const inner = { x: [1, 2] };
    const value = { inner, list: [inner.x] };
    const { copy } = serializeCopy<{ inner: { x: number[] }; list: number[][] }>(value);
    assert.notEqual(copy.inner, inner);
    assert.notEqual(copy.inner.x, inner.x);
    assert.notEqual(copy.list[0], inner.x);
    copy.inner.x.push(3);
    assert.deepStrictEqual(inner.x, [1, 2]);
  });
});
