import { UndecodableValueError, reasonOf } from '../../contract/errors';

/**
 * Reading what core/state/serializer.ts wrote: the format's constants (its tag key, how deep a value may nest) and
 * the decoder, which revives tagged values and refuses altered or too-deep text with a typed error.
 */

/** The key of a tagged value in the stored JSON: `{"$wp": tag, "v": ...}`. */
export const VALUE_TAG = '$wp';
const TAG = VALUE_TAG;

/**
 * How deeply a stored value may nest, in levels of its stored JSON: an object or an array counts one level,
 * a Set two and a Map three (the tag and the lists they are written as); a Date, a byte array, a bigint or
 * a special number counts none. Deeper values are refused when written, with `UNSERIALIZABLE_VALUE` naming
 * the step and the path, and stored values deeper than this are refused when read, with an
 * `UndecodableValueError` (same code). Every layer a value crosses (this encoder and decoder, JSON.stringify and
 * JSON.parse, the state's freeze, merge and validation) recurses about once per level; at this depth the
 * hungriest of them (this encoder) uses about half of Node's default stack (984 KB) when called from the top,
 * so an accepted value is read back in any process with the default stack. The check is a count, never a
 * caught RangeError: a process started with a larger `--stack-size` refuses the same values.
 *
 * @example
 * let deep: unknown = 1;
 * for (let i = 0; i < MAX_VALUE_DEPTH + 1; i++) deep = [deep];
 * serialize(deep); // throws SerializationError: nested deeper than 1000 levels
 */
export const MAX_VALUE_DEPTH = 1000;

/**
 * Levels the runtime may add around user values in what it writes for itself (a base snapshot holds the
 * state under `state`): written with `where.wrapping`, and always accepted on read, so a state at the
 * limit can still be folded by retention and read back.
 */
export const MAX_WRAPPING = 4;

/**
 * The value `serialize` wrote. Throws `UndecodableValueError` (`UNSERIALIZABLE_VALUE`) for text that is not
 * JSON, holds an unknown tag, or nests deeper than {@link MAX_VALUE_DEPTH} (written by another process or
 * release, or altered): never a RangeError or SyntaxError.
 */
export function deserialize<T = unknown>(text: string): T {
  let parsed: unknown;
  try {
    // V8's JSON.parse keeps its own stack on the heap (200,000 levels parse on the default stack); decode counts them.
    parsed = JSON.parse(text);
  } catch (error) {
    throw new UndecodableValueError(
      `Cannot read a stored value: it is not valid JSON (${reasonOf(error)}). It was written by another process or release, or altered: run waypoint.verify(runId) to find the row that holds it.`,
      '$',
    );
  }
  try {
    return decode(parsed, 0) as T;
  } catch (error) {
    // A tag whose value has the wrong shape (`{"$wp":"map","v":3}`, `{"$wp":"bigint","v":"x"}`): altered,
    // never written by `serialize`. Anything else (our own error, a stack exhausted by the caller) goes as it is.
    if (!(error instanceof TypeError || error instanceof SyntaxError)) throw error;
    throw new UndecodableValueError(
      `Cannot read a stored value: a tagged value is malformed (${reasonOf(error)}). It was altered after it was written: run waypoint.verify(runId) to find the row that holds it.`,
      '$',
    );
  }
}

/**
 * Revives the tagged values of what JSON.parse just returned. That value is private to the call, so its
 * arrays and objects are decoded in place (no second copy of every container): a slot is only written
 * when its decoded value differs. `depth` counts the levels above `value` as `encode` counts them (a
 * Map three, a Set two: their stored levels).
 */
function decode(value: unknown, depth: number): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    checkDepth(depth);
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === null || typeof item !== 'object') continue;
      // A hole only exists in an array (anywhere else decode refuses its tag); deleting the index makes it one again.
      if (!Array.isArray(item) && (item as Record<string, unknown>)[TAG] === 'hole' && Object.hasOwn(item, TAG)) Reflect.deleteProperty(value, i);
      else value[i] = decode(item, depth + 1);
    }
    return value;
  }
  const obj = value as Record<string, unknown>;
  if (!Object.hasOwn(obj, TAG)) return decodeObject(obj, depth);
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
      checkDepth(depth + 2);
      return new Map((v as [unknown, unknown][]).map(([k, x]) => [decode(k, depth + 3), decode(x, depth + 3)]));
    case 'set':
      checkDepth(depth + 1);
      return new Set((v as unknown[]).map((x) => decode(x, depth + 2)));
    case 'obj':
      return decodeObject(v as Record<string, unknown>, depth);
    case 'hole':
      throw new UndecodableValueError("Cannot read a stored value: an array hole's tag stands outside an array; the row is corrupted.", '$');
    default:
      throw new UndecodableValueError(
        `Cannot read a stored value: unknown tag '${String(obj[TAG])}'; the row was written by a newer Waypoint or is corrupted. Read it with the release that wrote it, or run waypoint.verify(runId) to find the row.`,
        '$',
      );
  }
}

function decodeObject(obj: Record<string, unknown>, depth: number): Record<string, unknown> {
  checkDepth(depth);
  for (const key of Object.keys(obj)) {
    const value = obj[key];
    if (value === null || typeof value !== 'object') continue;
    const decoded = decode(value, depth + 1);
    if (decoded !== value) defineData(obj, key, decoded);
  }
  return obj;
}

/** Refuses a container whose innermost stored level has `depth` levels above it: deeper than `encode` writes. */
function checkDepth(depth: number): void {
  if (depth < MAX_VALUE_DEPTH + MAX_WRAPPING) return;
  throw new UndecodableValueError(
    `Cannot read a stored value: it is nested deeper than ${MAX_VALUE_DEPTH} levels, the most this release reads or writes; it was written by another process or release (or altered). Run waypoint.verify(runId) to find the row that holds it.`,
    '$',
  );
}

/** Sets an own data property; unlike `out[key] = v`, a "__proto__" key stays data and never becomes a prototype. */
export function defineData(out: object, key: string, value: unknown): void {
  Object.defineProperty(out, key, { value, enumerable: true, writable: true, configurable: true });
}
