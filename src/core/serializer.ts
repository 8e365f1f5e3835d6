import { hash } from 'node:crypto';
import { SerializationError } from './errors';

/**
 * Canonical serialization of everything Waypoint stores: JSON values plus Date, Map, Set, BigInt,
 * Uint8Array (and Buffer), undefined, NaN and ±Infinity, which JSON alone would lose or corrupt. Object keys
 * are written sorted, so equal values serialize to equal strings and their SHA-256 is stable.
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
export function serialize(value: unknown, where: { runId?: string; step?: string; what?: string } = {}): string {
  return JSON.stringify(encode(value, newState(where)));
}

/**
 * `serialize(value)` and a private copy equal to `deserialize` of it, for the price of one serialization
 * when nothing in `value` needs a tag (the common case: JSON data): the encoded tree is then made of new
 * plain objects and arrays with exactly what parsing the text gives back (sorted keys, no undefined
 * values, -0 as 0), so it is the copy. Values with tags are decoded from the text as usual.
 *
 * @example
 * const { text, copy } = serializeCopy({ b: 1, a: [2] }); // text '{"a":[2],"b":1}', copy { a: [2], b: 1 }
 */
export function serializeCopy<T = unknown>(value: unknown, where: Where = {}): { text: string; copy: T } {
  const state = newState(where);
  const encoded = encode(value, state);
  const text = JSON.stringify(encoded);
  return { text, copy: (state.tagged ? deserialize(text) : encoded) as T };
}

export function deserialize<T = unknown>(text: string): T {
  return decode(JSON.parse(text)) as T;
}

/** Hex SHA-256 of a string. */
export function sha256(text: string): string {
  // The one-shot form: the same digest without a Hash object per call (rows, keys and links hash at every step).
  return hash('sha256', text, 'hex');
}

const TAG = '$wp';

type Where = { runId?: string; step?: string; what?: string };

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
  where: Where;
  /** Set when the encoded tree holds a tag (so it is not what parsing its text gives back). */
  tagged: boolean;
}

function newState(where: Where): EncodeState {
  return { ancestors: [], path: [], where, tagged: false };
}

/** `$`, then `.key`, `[index]` or the written step for each step of the path. */
function pathOf(steps: readonly PathStep[]): string {
  let out = '$';
  for (const step of steps) out += typeof step === 'string' ? `.${step}` : typeof step === 'number' ? `[${step}]` : step.written;
  return out;
}

/** Encodes `value` at `step` below the value being encoded now. */
function encodeAt(value: unknown, step: PathStep, state: EncodeState): unknown {
  state.path.push(step);
  const encoded = encode(value, state);
  state.path.pop();
  return encoded;
}

function encode(value: unknown, state: EncodeState): unknown {
  const { ancestors, where } = state;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (Number.isFinite(value)) return Object.is(value, -0) ? 0 : value;
      state.tagged = true;
      return { [TAG]: 'num', v: String(value) };
    case 'bigint':
      state.tagged = true;
      return { [TAG]: 'bigint', v: value.toString() };
    case 'undefined':
      state.tagged = true;
      return { [TAG]: 'undef' };
    case 'function':
    case 'symbol':
      throw fail(`a ${typeof value} cannot be stored`, state.path, where);
    case 'object':
      break; // null, arrays and objects: below
  }
  if (value === null) return null;
  const obj = value;
  // Only the objects above this one: a value that appears twice side by side is no cycle (and is written twice).
  if (ancestors.includes(obj)) throw fail('circular reference', state.path, where);
  ancestors.push(obj);
  try {
    if (Array.isArray(obj)) {
      // A hole is written as null, as JSON writes it, and kept as null in the copy (map would keep the hole).
      const out: unknown[] = [];
      for (let i = 0; i < obj.length; i++) out.push(i in obj ? encodeAt(obj[i], i, state) : null);
      return out;
    }
    if (obj instanceof Date) {
      if (Number.isNaN(obj.getTime())) throw fail('invalid Date', state.path, where);
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
    const proto = Object.getPrototypeOf(obj) as object | null;
    if (proto !== Object.prototype && proto !== null && !isDataClassInstance(obj, proto)) {
      const name = (proto as { constructor?: { name?: string } }).constructor?.name ?? 'unknown';
      throw fail(`an instance of class ${name} (with methods) cannot be revived; return plain data instead`, state.path, where);
    }
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
  } finally {
    ancestors.pop();
  }
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

function fail(reason: string, steps: readonly PathStep[], where: Where): SerializationError {
  const path = pathOf(steps);
  const subject = where.what ?? 'value';
  const context = [where.step ? `step '${where.step}'` : '', where.runId ? `run '${where.runId}'` : ''].filter(Boolean).join(' of ');
  return new SerializationError(`Cannot serialize ${subject}${context ? ` of ${context}` : ''} at ${path}: ${reason}. Nothing was recorded.`, path, {
    runId: where.runId,
    step: where.step,
  });
}

/**
 * Revives the tagged values of what JSON.parse just returned. That value is private to the call, so its
 * arrays and objects are decoded in place (no second copy of every container): a slot is only written
 * when its decoded value differs.
 */
function decode(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item !== null && typeof item === 'object') value[i] = decode(item);
    }
    return value;
  }
  const obj = value as Record<string, unknown>;
  if (Object.hasOwn(obj, TAG)) {
    const v = obj.v;
    switch (obj[TAG]) {
      case 'num':
        return Number(v);
      case 'bigint':
        return BigInt(v as string);
      case 'undef':
        return undefined;
      case 'date':
        return new Date(v as string);
      case 'bytes':
        return new Uint8Array(Buffer.from(v as string, 'base64'));
      case 'map':
        return new Map((v as [unknown, unknown][]).map(([k, x]) => [decode(k), decode(x)]));
      case 'set':
        return new Set((v as unknown[]).map(decode));
      case 'obj':
        return decodeObject(v as Record<string, unknown>);
      default:
        throw new SerializationError(`Unknown stored tag '${String(obj[TAG])}'; the row was written by a newer Waypoint or is corrupted.`, '$');
    }
  }
  return decodeObject(obj);
}

function decodeObject(obj: Record<string, unknown>): Record<string, unknown> {
  for (const key of Object.keys(obj)) {
    const value = obj[key];
    if (value === null || typeof value !== 'object') continue;
    const decoded = decode(value);
    if (decoded !== value) defineData(obj, key, decoded);
  }
  return obj;
}

/** Sets an own data property; unlike `out[key] = v`, a "__proto__" key stays data and never becomes a prototype. */
export function defineData(out: object, key: string, value: unknown): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}
