import { hash } from 'node:crypto';
import { SerializationError } from '../../contract/errors';
import { MAX_VALUE_DEPTH, MAX_WRAPPING, VALUE_TAG as TAG, defineData, deserialize } from './value-decoder';

/**
 * Canonical serialization of everything Waypoint stores: JSON values plus Date, Map, Set, BigInt,
 * Uint8Array (and Buffer), undefined (in an array, a Map or a Set; an undefined property is left out, as
 * JSON leaves it), array holes, NaN, ±Infinity and -0, which JSON alone would lose or corrupt. Object keys
 * are written sorted, so equal values serialize to equal strings and their SHA-256 is stable. The table
 * of what comes back for each kind of value is in docs/guarantees.md (test/core/value-table.ts holds it,
 * and the values suite round-trips every row on every backend).
 *
 * Special values are tagged as `{"$wp": tag, "v": ...}`; a user object that itself has a `$wp` key is
 * escaped the same way, so no input can be mistaken for a tag. Anything else (functions, symbols, class
 * instances, circular references) is refused with a `SerializationError` naming the path, before anything
 * is written.
 *
 * @example
 * const text = serialize({ at: new Date(0), ids: new Set([1n]) });
 * deserialize(text); // { at: Date(0), ids: Set { 1n } }
 */
export function serialize(value: unknown, where: SerializeWhere = {}): string {
  return JSON.stringify(encode(value, newState(where)));
}

/**
 * `serialize(value)` as releases before holes were kept wrote it: a hole as null. Only for text that is
 * compared with, or hashed like, what those releases computed (a durable call's request hash, an existing
 * run's input); never for text that is stored to be read back.
 *
 * @example
 * serializeLegacyForm([1, , 3]); // '[1,null,3]', where serialize gives '[1,{"$wp":"hole"},3]'
 */
export function serializeLegacyForm(value: unknown, where: SerializeWhere = {}): string {
  return JSON.stringify(encode(value, newState(where, true)));
}

/**
 * `serialize(value)` and a private copy equal to `deserialize` of it, for the price of one serialization
 * when nothing in `value` needs a tag (the common case: JSON data): the encoded tree is then made of new
 * plain objects and arrays with exactly what parsing the text gives back (sorted keys, no undefined
 * values, no holes), so it is the copy. Values with tags are decoded from the text as usual.
 *
 * @example
 * const { text, copy } = serializeCopy({ b: 1, a: [2] }); // text '{"a":[2],"b":1}', copy { a: [2], b: 1 }
 */
export function serializeCopy<T = unknown>(value: unknown, where: SerializeWhere = {}): { text: string; copy: T } {
  const state = newState(where);
  const encoded = encode(value, state);
  const text = JSON.stringify(encoded);
  return { text, copy: (state.tagged ? deserialize(text) : encoded) as T };
}

/**
 * Throws the `SerializationError` that `serialize(value, where)` would for a value nested deeper than
 * {@link MAX_VALUE_DEPTH}, without recursion: for the callers that hand a value to a recursive library
 * (class-transformer, for the input state) before serializing it, where a deep value would exhaust the stack.
 *
 * @example
 * assertStorableDepth(input, { runId, what: 'input' }); // then plainToInstance(State, input) is safe
 */
export function assertStorableDepth(value: unknown, where: SerializeWhere = {}): void {
  // Each container is walked once at the deepest level it was met (a value shared by many parents is no blow-up).
  const seen = new WeakMap<object, number>();
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, above] = stack.pop()!;
    if (item === null || typeof item !== 'object' || item instanceof Date || ArrayBuffer.isView(item) || (seen.get(item) ?? -1) >= above) continue;
    seen.set(item, above);
    const depth = above + (Array.isArray(item) ? 1 : storedLevels(item));
    // Past the limit (or round a cycle) the recursive encoder, which stops at the limit, writes the exact error.
    if (depth > MAX_VALUE_DEPTH) encode(value, newState(where));
    const children = item instanceof Map ? [...item.keys(), ...item.values()] : item instanceof Set ? [...item] : Array.isArray(item) ? item : Object.values(item);
    for (const child of children) stack.push([child, depth]);
  }
}

/** Hex SHA-256 of a string. */
export function sha256(text: string): string {
  // The one-shot form: the same digest without a Hash object per call (rows, keys and links hash at every step).
  return hash('sha256', text, 'hex');
}

/** Where a value is serialized, for the messages of a refused value; `wrapping` is for the runtime's own envelopes. */
export type SerializeWhere = {
  runId?: string;
  step?: string;
  what?: string;
  /** Levels the runtime put around user values in this payload (at most MAX_WRAPPING), not counted against the limit. */
  wrapping?: number;
};

/** One step of a path: an object key, an array index, or a map / set position written out (`<key 0>`). */
type PathStep = string | number | { readonly written: string };

interface EncodeState {
  /** The objects and arrays being encoded, outermost first: a value among them is a circular reference. */
  ancestors: object[];
  /**
   * Where the value being encoded sits, as steps from the root. A readable path is only written when a
   * value is refused: building `$.a.b[3]` for every value encoded cost a string per property and item.
   */
  path: PathStep[];
  where: SerializeWhere;
  /** Set when the encoded tree holds a tag (so it is not what parsing its text gives back). */
  tagged: boolean;
  /** JSON levels the containers being encoded add up to (see `storedLevels`). */
  depth: number;
  /** The most `depth` may reach: MAX_VALUE_DEPTH plus the runtime's wrapping. */
  limit: number;
  /** Holes written as null (`serializeLegacyForm`). */
  legacyForm: boolean;
}

function newState(where: SerializeWhere, legacyForm = false): EncodeState {
  const limit = MAX_VALUE_DEPTH + Math.min(Math.max(where.wrapping ?? 0, 0), MAX_WRAPPING);
  return { ancestors: [], path: [], where, tagged: false, depth: 0, limit, legacyForm };
}

/** Steps kept at each end of a long path in an error; the middle is written as a count. */
const PATH_ENDS = 8;

/**
 * `$`, then `.key`, `[index]` or the written step for each step of the path. A path of a thousand steps
 * (a value refused for its depth) keeps its first and last steps and says how many are left out.
 */
function pathOf(steps: readonly PathStep[]): string {
  const written = (step: PathStep) => (typeof step === 'string' ? `.${step}` : typeof step === 'number' ? `[${step}]` : step.written);
  if (steps.length <= 3 * PATH_ENDS) return '$' + steps.map(written).join('');
  const head = steps.slice(0, PATH_ENDS).map(written).join('');
  const tail = steps.slice(-PATH_ENDS).map(written).join('');
  return `$${head}…(${steps.length - 2 * PATH_ENDS} more levels)…${tail}`;
}

/** Encodes `value` at `step` below the value being encoded now. */
function encodeAt(value: unknown, step: PathStep, state: EncodeState): unknown {
  state.path.push(step);
  const encoded = encode(value, state);
  state.path.pop();
  return encoded;
}

/**
 * Takes `obj` onto the ancestors, after refusing a circular reference or a level past the limit; returns the
 * stored levels it adds (taken off again by `encode`).
 */
function enter(obj: object, state: EncodeState): number {
  // Only the objects above this one: a value that appears twice side by side is no cycle (and is written twice).
  if (state.ancestors.includes(obj)) throw fail('circular reference', state.path, state.where);
  // A count, not a caught RangeError: the same values are refused whatever the process's stack size.
  const levels = Array.isArray(obj) ? 1 : storedLevels(obj);
  if (state.depth + levels > state.limit) {
    const why = `nested deeper than ${MAX_VALUE_DEPTH} levels, the most a stored value may have; store it flatter (for example as a list of nodes, or as a JSON string)`;
    throw fail(why, state.path, state.where);
  }
  state.ancestors.push(obj);
  state.depth += levels;
  return levels;
}

/**
 * The encoded form of `value` (what `JSON.stringify` writes). The hot path: every step's state goes through
 * it, so its helpers are plain functions taking the state (no closure or allocation per value beyond the output).
 */
function encode(value: unknown, state: EncodeState): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (Number.isFinite(value) && !Object.is(value, -0)) return value;
      // NaN, ±Infinity and -0, which JSON writes as null or 0. Number('-0') is -0, so every release that
      // reads the 'num' tag reads -0 back; a value without -0 is written (and hashed) as before.
      state.tagged = true;
      return { [TAG]: 'num', v: Object.is(value, -0) ? '-0' : String(value) };
    case 'bigint':
      state.tagged = true;
      return { [TAG]: 'bigint', v: value.toString() };
    case 'undefined':
      state.tagged = true;
      return { [TAG]: 'undef' };
    case 'function':
    case 'symbol':
      throw fail(`a ${typeof value} cannot be stored`, state.path, state.where);
    case 'object':
      break; // null, arrays and objects: below
  }
  if (value === null) return null;
  const levels = enter(value, state);
  try {
    return encodeContainer(value, state);
  } finally {
    state.ancestors.pop();
    state.depth -= levels;
  }
}

/** An array, a tagged builtin (Date, bytes, Map, Set) or a plain object, once `enter` has taken it on. */
function encodeContainer(obj: object, state: EncodeState): unknown {
  if (Array.isArray(obj)) return encodeArray(obj, state);
  const builtin = encodeBuiltin(obj, state);
  if (builtin !== undefined) return builtin;
  if (ArrayBuffer.isView(obj) || obj instanceof ArrayBuffer || isSharedBuffer(obj)) throw binaryRefused(obj, state);
  const proto = Object.getPrototypeOf(obj) as object | null;
  if (proto !== Object.prototype && proto !== null && !isDataClassInstance(obj, proto)) {
    const name = (proto as { constructor?: { name?: string } }).constructor?.name ?? 'unknown';
    throw fail(`an instance of class ${name} (with methods) cannot be revived; return plain data instead`, state.path, state.where);
  }
  return encodeRecord(obj, state);
}

function encodeArray(obj: unknown[], state: EncodeState): unknown[] {
  // A hole is tagged, so it comes back a hole (JSON writes it as null, which reads back as another value).
  const out: unknown[] = [];
  for (let i = 0; i < obj.length; i++) out.push(i in obj ? encodeAt(obj[i], i, state) : state.legacyForm ? null : holeTag(state));
  return out;
}

/** The tag of a Date, a Uint8Array, a Map or a Set; undefined for any other object (no tag encodes to undefined). */
function encodeBuiltin(obj: object, state: EncodeState): unknown {
  if (obj instanceof Date) {
    if (Number.isNaN(obj.getTime())) throw fail('invalid Date', state.path, state.where);
    state.tagged = true;
    return { [TAG]: 'date', v: obj.toISOString() };
  }
  if (obj instanceof Uint8Array) {
    state.tagged = true;
    return { [TAG]: 'bytes', v: Buffer.from(obj.buffer, obj.byteOffset, obj.byteLength).toString('base64') };
  }
  if (obj instanceof Map) {
    state.tagged = true;
    return {
      [TAG]: 'map',
      v: [...obj.entries()].map(([k, v], i) => [encodeAt(k, { written: `<key ${i}>` }, state), encodeAt(v, { written: `<value ${i}>` }, state)]),
    };
  }
  if (obj instanceof Set) {
    state.tagged = true;
    return { [TAG]: 'set', v: [...obj.values()].map((v, i) => encodeAt(v, { written: `<item ${i}>` }, state)) };
  }
  return undefined;
}

/** A plain object (or a data class instance): its defined properties, keys sorted; escaped when it has a `$wp` key. */
function encodeRecord(obj: object, state: EncodeState): unknown {
  const out: Record<string, unknown> = {};
  for (const key of sortedKeys(Object.keys(obj))) {
    const v = (obj as Record<string, unknown>)[key];
    if (v === undefined) continue; // as JSON: an absent key and an undefined one read the same
    const encoded = encodeAt(v, key, state);
    // A plain assignment makes the same own data property, faster; "__proto__" would set the prototype instead.
    if (key === '__proto__') defineData(out, key, encoded);
    else out[key] = encoded;
  }
  if (!Object.hasOwn(out, TAG)) return out;
  state.tagged = true;
  return { [TAG]: 'obj', v: out };
}

/**
 * The JSON levels an object (not an array) adds to the stored text: a Map is written as a tag holding a list
 * of [key, value] pairs, a Set as a tag holding a list, a Date or byte array as a tag holding a string.
 */
function storedLevels(obj: object): number {
  if (obj instanceof Map) return 3;
  if (obj instanceof Set) return 2;
  return obj instanceof Date || obj instanceof Uint8Array ? 0 : 1;
}

/**
 * `keys.sort()`, in place. Most objects have a few keys, and the builtin sort set up a work copy of the
 * array for each of them (the largest allocation of a serialization after the text itself); an insertion
 * sort of a short array allocates nothing. Both order by UTF-16 code units, as `<` compares strings.
 */
function sortedKeys(keys: string[]): string[] {
  if (keys.length > 16) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i];
    let j = i - 1;
    for (; j >= 0 && keys[j] > key; j--) keys[j + 1] = keys[j];
    keys[j + 1] = key;
  }
  return keys;
}

/** SharedArrayBuffer is not defined everywhere (a browser page that is not cross-origin isolated). */
function isSharedBuffer(obj: object): boolean {
  return typeof SharedArrayBuffer === 'function' && obj instanceof SharedArrayBuffer;
}

/** The error for a binary value other than a Uint8Array: a typed array, a DataView or an array buffer. */
function binaryRefused(obj: object, state: EncodeState): SerializationError {
  const name = (Object.getPrototypeOf(obj) as { constructor?: { name?: string } } | null)?.constructor?.name ?? 'binary value';
  const article = /^[AEIOU]/.test(name) ? 'an' : 'a';
  const why = `${article} ${name} cannot be stored (of binary values, only Uint8Array and Buffer are); store its bytes as a Uint8Array, or its numbers as an array`;
  return fail(why, state.path, state.where);
}

/** The tag of an array hole (an index the array does not have), which `decode` deletes again. */
function holeTag(state: EncodeState): unknown {
  state.tagged = true;
  return { [TAG]: 'hole' };
}

/**
 * A class instance whose prototype chain adds no methods (a class-validator state class, a DTO) holds
 * nothing that plain data cannot: it is stored as its own enumerable properties.
 */
function isDataClassInstance(obj: object, proto: object): boolean {
  for (let p: object | null = proto; p !== null && p !== Object.prototype; p = Object.getPrototypeOf(p) as object | null) {
    for (const name of Object.getOwnPropertyNames(p)) {
      if (name === 'constructor') continue;
      const d = Object.getOwnPropertyDescriptor(p, name);
      if (d && (typeof d.value === 'function' || d.get || d.set)) return false;
    }
  }
  return !(Symbol.iterator in obj);
}

function fail(reason: string, steps: readonly PathStep[], where: SerializeWhere): SerializationError {
  const path = pathOf(steps);
  const subject = where.what ?? 'value';
  const context = [where.step ? `step '${where.step}'` : '', where.runId ? `run '${where.runId}'` : ''].filter(Boolean).join(' of ');
  return new SerializationError(
    `Cannot serialize ${subject}${context ? ` of ${context}` : ''} at ${path}: ${reason}. Nothing was recorded: put plain data at that path instead (convert the value, or keep it out of the state).`,
    path,
    {
      runId: where.runId,
      step: where.step,
    },
  );
}
