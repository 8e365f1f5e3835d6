/**
 * What a stored value may be and what comes back: the one table, as data. The values suite
 * (values-suite.ts) round-trips every row on every backend, and test/docs/values-table.test.ts holds the
 * table in docs/guarantees.md to exactly these rows and texts (its failure prints the table to paste).
 * A row either comes back (each case's `expected`, or the value itself, with the exact classes) or is
 * refused with UNSERIALIZABLE_VALUE naming the run, the step and the path (`refused`).
 */

/** The `expected` of a value that is left out: the property holding it is not stored at all. */
export const ABSENT = Symbol('absent');

/** One value of a row: what a step returns or a run is given, and what must come back (the value itself when absent). */
export interface ValueCase {
  value: unknown;
  expected?: unknown;
}

export interface ValueRow {
  /** The value, as the docs table shows it (markdown). */
  value: string;
  /** "Stored and returned as", as the docs table shows it. */
  back: string;
  /** The docs table's note ('' for none). */
  note: string;
  /** Fresh values each call (a step's state is frozen, so no two runs share one). */
  cases: () => ValueCase[];
  /** Set for a refused row: a fragment of the message and the path below the value ('' for the value itself). */
  refused?: { reason: string; below: string };
  /** What the expected value cannot say (identity), checked on each value that came back. */
  check?: (back: unknown) => string | undefined;
}

const REFUSED = 'refused: `UNSERIALIZABLE_VALUE`';

class Point {
  x = 1;
  y = 2;
}

class Client {
  url = 'http://example.test';
  call(): string {
    return this.url;
  }
}

function namedFunction(): number {
  return 1;
}

function circular(): Record<string, unknown> {
  const a: Record<string, unknown> = { name: 'a' };
  a.self = a;
  return a;
}

function nullPrototype(): Record<string, unknown> {
  const bare = Object.create(null) as Record<string, unknown>;
  bare.k = 'v';
  return bare;
}

function hidden(): object {
  const obj = { a: 1 };
  Object.defineProperty(obj, 'hidden', { value: 2, enumerable: false });
  return obj;
}

function shared(): Record<string, unknown> {
  const one = { x: 1 };
  return { a: one, b: one };
}

const same = (...values: unknown[]): ValueCase[] => values.map((value) => ({ value }));

export const VALUE_TABLE: readonly ValueRow[] = [
  // JSON
  {
    value: "`'text'`, `true`, `false`, `null`",
    back: 'the same',
    note: '',
    cases: () => same('text', '', true, false, null),
  },
  {
    value: '`42`, `-1.5`, `0.1 + 0.2`, `5e-324`, `Number.MAX_VALUE`',
    back: 'the same number',
    note: 'every finite double exactly',
    cases: () => same(42, -1.5, 0.1 + 0.2, 5e-324, Number.MAX_VALUE, 2 ** 53 + 2),
  },
  {
    value: "`'a\\u0000b'`, a lone surrogate `'\\uD800'`, `'é😀'`",
    back: 'the same string',
    note: 'NUL and lone surrogates too, on PostgreSQL as well (stored escaped)',
    cases: () => same('a\u0000b', '\uD800', 'x\uDC00y', 'é😀', '\u2028'),
  },
  {
    value: "`[1, 'two', { three: 3 }]`",
    back: 'an `Array`, the same',
    note: '',
    cases: () => same([1, 'two', { three: 3 }], []),
  },
  {
    value: '`{ b: 1, a: 2 }`',
    back: 'a plain object, keys in sorted order',
    note: 'keys are written sorted, so equal values store equal text',
    cases: () => [{ value: { b: 1, a: 2 }, expected: { a: 2, b: 1 } }, { value: {} }],
  },
  // Numbers JSON loses
  {
    value: '`NaN`, `Infinity`, `-Infinity`',
    back: 'the same number',
    note: 'JSON would write `null`',
    cases: () => same(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY),
  },
  {
    value: '`-0`, `[-0, 0]`, `new Map([[1, -0]])`',
    back: '`-0`',
    note: 'earlier releases stored it as `0`; a `Map` key or `Set` item `-0` is `0` in JavaScript itself',
    cases: () => same(-0, [-0, 0], new Map([[1, -0]]), { n: -0 }),
  },
  {
    value: '`12n`, `-45n`, `2n ** 100n`',
    back: 'a `bigint`, exact',
    note: '',
    cases: () => same(12n, -45n, 0n, 2n ** 100n, -(2n ** 100n)),
  },
  // undefined and holes
  {
    value: '`[1, undefined]`, `new Map([[1, undefined]])`, `new Set([undefined])`',
    back: '`undefined`, kept',
    note: '`1 in list` is true',
    cases: () => same([1, undefined], [undefined], new Map([[1, undefined]]), new Map([[undefined, 1]]), new Set([undefined])),
  },
  {
    value: '`{ a: undefined }`, a step returning `{ key: undefined }`',
    back: 'left out',
    note: "as in JSON: `'a' in obj` is false, and the state keeps `key` as it was (return `{ key: null }` to clear it)",
    cases: () => [
      { value: { a: undefined, b: 1 }, expected: { b: 1 } },
      { value: undefined, expected: ABSENT },
    ],
  },
  {
    value: '`[1, , 3]` (a hole)',
    back: 'a hole at its index',
    note: '`1 in list` is false, the length is kept; earlier releases stored a hole as `null`',
    cases: () => same([1, , 3], [, 'x', ,], new Array(3)),
  },
  // Dates
  {
    value: "`new Date('2024-02-29T12:30:15.123Z')`",
    back: 'a `Date`, to the millisecond',
    note: 'the whole range, year -271821 to 275760',
    cases: () => same(new Date('2024-02-29T12:30:15.123Z'), new Date(0), new Date(8.64e15), new Date(-8.64e15)),
  },
  {
    value: '`new Date(NaN)` (an invalid Date)',
    back: REFUSED,
    note: 'store `null` or the text that failed to parse',
    cases: () => same(new Date(Number.NaN), new Date('not a date')),
    refused: { reason: 'invalid Date', below: '' },
  },
  // Maps and Sets
  {
    value: "`new Map([['a', 1], [2, 'b']])`",
    back: 'a `Map`, key types and order kept',
    note: '',
    cases: () =>
      same(
        new Map<unknown, unknown>([
          ['a', 1],
          [2, 'b'],
          [3n, null],
          [null, undefined],
        ]),
        new Map(),
      ),
  },
  {
    value: "`new Map([[{ id: 1 }, 'x']])`",
    back: 'a `Map` whose key is an equal new object',
    note: 'look such keys up by value, not by the object you stored',
    cases: () => same(new Map([[{ id: 1 }, 'x']]), new Map([[new Date(5), new Date(6)]])),
  },
  {
    value: '`new Set([new Date(0), 1n])`',
    back: 'a `Set`, order kept',
    note: '',
    cases: () => same(new Set<unknown>([new Date(0), new Date(1), 1n, 'a', { o: 1 }]), new Set()),
  },
  {
    value: "`new Set([new Map([['k', new Set([1])]])])`",
    back: 'the same nesting',
    note: '',
    cases: () => same(new Set([new Map([['k', new Set([1])]])]), { m: new Map([[[1], [new Set([[2]])]]]) }),
  },
  // Bytes
  {
    value: '`new Uint8Array([0, 255])`',
    back: 'a `Uint8Array`',
    note: 'a view at an offset comes back as just its bytes',
    cases: () => [
      { value: new Uint8Array([0, 1, 127, 128, 255]) },
      { value: new Uint8Array([9, 8, 7, 6]).subarray(1, 3), expected: new Uint8Array([8, 7]) },
      { value: new Uint8Array(0) },
    ],
  },
  {
    value: "`Buffer.from('hi')`",
    back: 'a `Uint8Array` (not a `Buffer`)',
    note: '`Buffer.from(value)` makes it a `Buffer` again',
    cases: () => [{ value: Buffer.from('hi'), expected: new Uint8Array([104, 105]) }],
  },
  {
    value: '`Float32Array`, `Float64Array`, `Int8Array`, `Uint16Array`, `BigInt64Array` and every other typed array',
    back: REFUSED,
    note: 'store `Array.from(value)`, or its bytes as a `Uint8Array`',
    cases: () =>
      same(
        new Float32Array([1.5]),
        new Float64Array([1.5]),
        new Int8Array([-1]),
        new Uint8ClampedArray([1]),
        new Int16Array([1]),
        new Uint16Array([1]),
        new Int32Array([1]),
        new Uint32Array([1]),
        new BigInt64Array([1n]),
        new BigUint64Array([1n]),
      ),
    refused: { reason: 'cannot be stored (of binary values, only Uint8Array and Buffer are)', below: '' },
  },
  {
    value: '`DataView`, `ArrayBuffer`, `SharedArrayBuffer`',
    back: REFUSED,
    note: 'store `new Uint8Array(buffer)`',
    cases: () => same(new DataView(new ArrayBuffer(2)), new ArrayBuffer(2), new SharedArrayBuffer(2)),
    refused: { reason: 'cannot be stored (of binary values, only Uint8Array and Buffer are)', below: '' },
  },
  // Objects that are more than data
  {
    value: 'an instance of a class with fields only (`new Point()`)',
    back: 'a plain object with its own fields',
    note: 'the class is not kept',
    cases: () => [{ value: new Point(), expected: { x: 1, y: 2 } }],
  },
  {
    value: 'an instance of a class with methods or accessors (`new Client()`)',
    back: REFUSED,
    note: 'the message names the class; return plain data',
    cases: () => same(new Client()),
    refused: { reason: 'an instance of class Client (with methods) cannot be revived', below: '' },
  },
  {
    value: "`new Error('x')`, `/x/`, `new URL('…')`, `new String('x')`, a `Promise`, a `WeakMap`",
    back: REFUSED,
    note: 'store `{ name, message }`, the pattern or the URL text',
    cases: () => same(new Error('x'), /x/, new URL('https://example.test/'), new String('x'), Promise.resolve(1), new WeakMap()),
    refused: { reason: 'cannot be revived; return plain data instead', below: '' },
  },
  {
    value: '`() => 1`, a function',
    back: REFUSED,
    note: '',
    cases: () => same(() => 1, namedFunction),
    refused: { reason: 'a function cannot be stored', below: '' },
  },
  {
    value: "`Symbol('s')`",
    back: REFUSED,
    note: '',
    cases: () => same(Symbol('s')),
    refused: { reason: 'a symbol cannot be stored', below: '' },
  },
  {
    value: 'a circular reference (`a.self = a`)',
    back: REFUSED,
    note: 'the path names where the cycle closes',
    cases: () => same(circular()),
    refused: { reason: 'circular reference', below: '.self' },
  },
  {
    value: 'one object reached twice (`{ a: one, b: one }`)',
    back: 'two equal, separate objects',
    note: 'identity is not kept',
    cases: () => [{ value: shared(), expected: { a: { x: 1 }, b: { x: 1 } } }],
    check: (back) => ((back as { a: unknown; b: unknown }).a === (back as { a: unknown; b: unknown }).b ? 'a and b came back as one object' : undefined),
  },
  {
    value: '`Object.create(null)` with properties',
    back: 'a plain object (with `Object.prototype`)',
    note: '',
    cases: () => [{ value: nullPrototype(), expected: { k: 'v' } }],
  },
  {
    value: "a symbol-keyed, non-enumerable or array's non-index property",
    back: 'dropped',
    note: "only own enumerable string keys and an array's items are stored",
    cases: () => [
      { value: { [Symbol('k')]: 1, a: 1 }, expected: { a: 1 } },
      { value: hidden(), expected: { a: 1 } },
      { value: Object.assign([1], { extra: 2 }), expected: [1] },
    ],
  },
  // Keys with a meaning elsewhere
  {
    value: '`JSON.parse(\'{"__proto__": {"x": 1}}\')`',
    back: 'an own `__proto__` property',
    note: 'data, never the prototype: nothing is polluted',
    cases: () => same(JSON.parse('{"__proto__":{"x":1},"a":2}'), JSON.parse('{"n":{"__proto__":[1]}}')),
  },
  {
    value: "`{ constructor: 1, hasOwnProperty: 'x' }`",
    back: 'the same',
    note: '',
    cases: () => same({ constructor: 1, hasOwnProperty: 'x', toString: null }),
  },
  {
    value: "`{ $wp: 'date', v: '2020-01-01T00:00:00.000Z' }`",
    back: 'the same plain object',
    note: "an object shaped like the codec's own tags is escaped, never decoded as one",
    cases: () =>
      same(
        { $wp: 'date', v: '2020-01-01T00:00:00.000Z' },
        { $wp: 'undef' },
        [{ $wp: 'hole' }],
        { $wp: 'obj', v: { $wp: 'num', v: 'NaN' } },
        new Map([
          [
            { $wp: 'set', v: [] },
            { $wp: 'bigint', v: '1' },
          ],
        ]),
        { $wp: 1 },
      ),
  },
];

/**
 * A description of `value` that tells apart everything the table promises: classes (prototypes), key
 * and entry order, holes, a key holding undefined, -0, NaN, lone surrogates. `deepStrictEqual` ignores
 * key and Map order; this does not.
 */
export function shape(value: unknown): string {
  switch (typeof value) {
    case 'undefined':
      return 'undefined';
    case 'number':
      return Object.is(value, -0) ? '-0' : String(value);
    case 'bigint':
      return `${value}n`;
    case 'string':
      return JSON.stringify(value); // escapes a lone surrogate, so it is told apart from U+FFFD
    case 'boolean':
      return String(value);
    case 'object':
      break;
    default:
      return typeof value;
  }
  if (value === null) return 'null';
  const proto = Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null;
  const cls = proto === null ? 'null-prototype' : (proto.constructor?.name ?? '?');
  if (Array.isArray(value)) {
    const items: string[] = [];
    for (let i = 0; i < value.length; i++) items.push(i in value ? shape(value[i]) : '<hole>');
    return `${cls}[${items.join(', ')}]${extraKeys(value)}`;
  }
  if (value instanceof Date) return `${cls}(${value.getTime()})`;
  if (value instanceof Uint8Array) return `${cls}<${[...value].join(',')}>`;
  if (value instanceof Map) return `${cls}{${[...value].map(([k, v]) => `${shape(k)} => ${shape(v)}`).join(', ')}}`;
  if (value instanceof Set) return `${cls}{${[...value].map(shape).join(', ')}}`;
  const keys = Reflect.ownKeys(value).map((key) => `${String(key)}: ${shape(Object.getOwnPropertyDescriptor(value, key)?.value)}`);
  return `${cls}{${keys.join(', ')}}`;
}

/** Own properties of an array besides its items and length. */
function extraKeys(list: unknown[]): string {
  const extra = Reflect.ownKeys(list).filter((k) => k !== 'length' && !(typeof k === 'string' && /^\d+$/.test(k)));
  return extra.length === 0 ? '' : `+{${extra.map(String).join(', ')}}`;
}

/** The docs table's rows, as `| value | stored and returned as | note |` lines. */
export function tableMarkdown(): string {
  const lines = ['| Value | Stored and returned as | Note |', '| --- | --- | --- |'];
  for (const row of VALUE_TABLE) lines.push(`| ${row.value} | ${row.back} | ${row.note} |`);
  return lines.join('\n');
}
