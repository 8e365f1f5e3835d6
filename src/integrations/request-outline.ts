import { serializeLegacyForm, sha256 } from '../core/state/serializer';

/**
 * A small fingerprint of a `durable()` request, stored beside its hash so that a changed request can be
 * explained (which key, which element) without storing the request again. Two levels deep: a plain
 * object's keys, and under each key one digest, a nested object's key digests (a model call's settings),
 * or an array's entries (a prompt's messages). Digests are 8 hex characters: enough to locate a
 * difference (the full SHA-256 still decides equality).
 *
 * An array keeps a digest per element for its last {@link TAIL} elements only, and before them digests of
 * blocks that double in size towards the start (`"0-15:1a2b3c4d"`): O(log n) entries, so the bytes per
 * call stay nearly flat however long a conversation grows (a per-message digest would store the whole
 * history again with every call). A tool loop's prompt only grows at its end, and the first call that
 * differs is the one after the last that matched, so the difference is nearly always in the tail, where
 * it is located exactly; in a block, the block's range is named.
 */
export type RequestOutline = string | string[] | { [key: string]: string | string[] | { [key: string]: string | string[] } };

/** One place where the request now differs from the recorded one. */
export interface RequestDifference {
  /** Keys and indexes from the request's root to the differing value (`['params', 'prompt', 3]`). */
  path: (string | number)[];
  /** What the request holds there now (undefined if the key or element is gone). */
  now: unknown;
  /** Element counts when an array grew or shrank. */
  counts?: { recorded: number; now: number };
  /** When the record locates the difference only to a block of elements: its first and last index. */
  range?: [number, number];
}

/** Elements at the end of an array that get a digest each. */
export const TAIL = 8;
const DIGEST_CHARS = 8;

function digest(value: unknown): string {
  // Hashed as the request hash is (see durableCall): outlines recorded by earlier releases still compare.
  return sha256(serializeLegacyForm(value, { what: 'request part' })).slice(0, DIGEST_CHARS);
}

function combine(digests: string[]): string {
  return sha256(digests.join('')).slice(0, DIGEST_CHARS);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function arrayEntries(digests: string[]): string[] {
  const n = digests.length;
  if (n <= TAIL) return digests;
  const blocks: string[] = [];
  for (let end = n - TAIL, size = TAIL; end > 0; size *= 2) {
    const start = Math.max(0, end - size);
    blocks.unshift(`${start}-${end - 1}:${combine(digests.slice(start, end))}`);
    end = start;
  }
  return [...blocks, ...digests.slice(n - TAIL)];
}

function level(value: unknown, depth: number): RequestOutline {
  if (Array.isArray(value)) return arrayEntries(value.map((element) => digest(element)));
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
  return compare(recorded, request, [], 2);
}

function compare(recorded: unknown, value: unknown, path: (string | number)[], depth: number): RequestDifference | undefined {
  if (value === undefined) return recorded === undefined ? undefined : { path, now: undefined };
  if (Array.isArray(value)) return compareArray(recorded, value, path);
  if (depth > 0 && isPlainObject(value)) {
    if (!isPlainObject(recorded)) return { path, now: value };
    for (const key of new Set([...Object.keys(value), ...Object.keys(recorded)])) {
      const found = compare(recorded[key], value[key], [...path, key], depth - 1);
      if (found) return found;
    }
    return undefined;
  }
  return recorded === digest(value) ? undefined : { path, now: value };
}

const BLOCK = /^(\d+)-(\d+):(.+)$/;

function compareArray(recorded: unknown, items: unknown[], path: (string | number)[]): RequestDifference | undefined {
  if (!Array.isArray(recorded) || !recorded.every((entry) => typeof entry === 'string')) return { path, now: items };
  const digests = items.map((item) => digest(item));
  const entries: string[] = recorded;
  const recordedLength = entries.reduce((n, entry) => n + blockSize(entry), 0);
  const counts = recordedLength === items.length ? {} : { counts: { recorded: recordedLength, now: items.length } };
  let index = 0;
  for (const entry of entries) {
    const block = BLOCK.exec(entry);
    if (block) {
      const [start, end] = [Number(block[1]), Number(block[2])];
      if (end >= digests.length || combine(digests.slice(start, end + 1)) !== block[3]) return { path: [...path, start], now: items[start], range: [start, end], ...counts };
      index = end + 1;
      continue;
    }
    if (digests[index] !== entry) return { path: [...path, index], now: items[index], ...counts };
    index += 1;
  }
  return index < items.length ? { path: [...path, index], now: items[index], ...counts } : undefined;
}

function blockSize(entry: string): number {
  const block = BLOCK.exec(entry);
  return block ? Number(block[2]) - Number(block[1]) + 1 : 1;
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
  if (difference.range) return `one of ${where}..[${difference.range[1]}] differs${counts}; now ${where}: ${excerpt(difference.now)}`;
  return `${where} differs${counts}; now: ${excerpt(difference.now)}`;
}
