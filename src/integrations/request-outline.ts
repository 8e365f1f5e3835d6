import { serialize, sha256 } from '../core/serializer';

/**
 * A small fingerprint of a `durable()` request, stored beside its hash so that a changed request can be
 * explained (which key, which element) without storing the request again. Two levels deep: a plain
 * object's keys, and under each key either one digest, the digests of an array's elements (a prompt's
 * messages), or the digests of a nested object's keys (a model call's settings). Digests are 8 hex
 * characters: enough to locate a difference (the full SHA-256 still decides equality), about 11 stored
 * bytes per message.
 */
export type RequestOutline = string | string[] | { [key: string]: string | string[] | { [key: string]: string | string[] } };

/** One place where the request now differs from the recorded one. */
export interface RequestDifference {
  /** Keys and indexes from the request's root to the differing value (`['params', 'prompt', 3]`). */
  path: (string | number)[];
  /** What the request holds there now (undefined if the key or element is gone). */
  now: unknown;
  /** Element counts when an array grew or shrank at this point (the first extra or missing element). */
  counts?: { recorded: number; now: number };
}

const DIGEST_CHARS = 8;

function digest(value: unknown): string {
  return sha256(serialize(value, { what: 'request part' })).slice(0, DIGEST_CHARS);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function level(value: unknown, depth: number): RequestOutline {
  if (Array.isArray(value)) return value.map((element) => digest(element));
  if (depth > 0 && isPlainObject(value)) {
    const out: Record<string, string | string[]> = {};
    for (const [key, child] of Object.entries(value)) if (child !== undefined) out[key] = level(child, depth - 1) as string | string[];
    return out;
  }
  return digest(value);
}

/** The outline of a request (call only with a request that `serialize` accepted). */
export function outlineOf(request: unknown): RequestOutline {
  return level(request, 2);
}

/**
 * The first difference between a recorded outline and the request now, walking keys in the request's
 * order (then keys only the record has), or undefined when the outlines agree or the record has none.
 */
export function firstDifference(recorded: unknown, request: unknown): RequestDifference | undefined {
  if (recorded === undefined) return undefined;
  return compare(recorded, outlineOf(request), request, []);
}

function compare(recorded: unknown, now: RequestOutline | undefined, value: unknown, path: (string | number)[]): RequestDifference | undefined {
  if (now === undefined) return recorded === undefined ? undefined : { path, now: undefined };
  if (typeof now === 'string') return recorded === now ? undefined : { path, now: value };
  if (Array.isArray(now)) {
    const before = Array.isArray(recorded) ? (recorded as unknown[]) : [];
    const items = value as unknown[];
    const length = Math.max(before.length, now.length);
    for (let i = 0; i < length; i++) {
      if (before[i] === now[i]) continue;
      const counts = before.length === now.length ? undefined : { recorded: before.length, now: now.length };
      return { path: [...path, i], now: items[i], ...(counts ? { counts } : {}) };
    }
    return Array.isArray(recorded) ? undefined : { path, now: value };
  }
  if (typeof recorded !== 'object' || recorded === null || Array.isArray(recorded)) return { path, now: value };
  const old = recorded as Record<string, unknown>;
  const fields = value as Record<string, unknown>;
  for (const key of new Set([...Object.keys(now), ...Object.keys(old)])) {
    const found = compare(old[key], now[key], fields[key], [...path, key]);
    if (found) return found;
  }
  return undefined;
}

/** Text of a value that JSON could not show (a cycle, a function, a bigint). */
export function plainText(value: unknown): string {
  if (typeof value === 'function') return `[function ${value.name || 'anonymous'}]`;
  if (typeof value === 'object' && value !== null) return Object.prototype.toString.call(value);
  return String(value);
}

/** A value as short JSON-like text for an error message: at most `max` characters. */
export function excerpt(value: unknown, max = 160): string {
  let text: string;
  try {
    text = value === undefined ? 'nothing' : (JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) ?? plainText(value));
  } catch {
    text = plainText(value);
  }
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} chars)`;
}

/** The generic description of a difference: `request.params.prompt[3] (now: ...)`. */
export function describeDifference(difference: RequestDifference): string {
  const where = difference.path.reduce<string>((text, part) => (typeof part === 'number' ? `${text}[${part}]` : `${text}.${part}`), 'request');
  const counts = difference.counts ? ` (${difference.counts.recorded} recorded, ${difference.counts.now} now)` : '';
  return `${where} differs${counts}; now: ${excerpt(difference.now)}`;
}
