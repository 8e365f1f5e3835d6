import { InvalidSignalNameError, SignalPayloadTooLargeError } from './errors';

/** The longest signal name, in characters (Unicode code points). */
export const MAX_SIGNAL_NAME_LENGTH = 128;

/** Default of `maxSignalPayloadBytes`: 256 KiB of serialized JSON (UTF-8). */
export const DEFAULT_MAX_SIGNAL_PAYLOAD_BYTES = 256 * 1024;

// Characters a name may not hold anywhere: C0 and C1 controls with NUL and DEL (PostgreSQL refuses NUL,
// and a newline or escape sequence would forge lines in the CLI's output and the logs), lone surrogates
// (not encodable as UTF-8: one backend refuses them, another stores U+FFFD, and the name no longer
// matches), line and paragraph separators, and the bidirectional embedding, override and isolate controls,
// which make a name display as another one.
const FORBIDDEN = /[\p{Cc}\p{Cs}\p{Zl}\p{Zp}\u202A-\u202E\u2066-\u2069]/u;
const EDGE_SPACE = /^\s|\s$/u;

/**
 * The one rule for signal names, applied by `waypoint.signal()`, `ctx.waitFor()`, the CLI's `runs signal`
 * and the page's signal action before any store call: a string of 1 to 128 characters with none of the
 * characters above and no leading or trailing whitespace. Letters of any script, digits, spaces inside,
 * punctuation and symbols (`approval`, `review:legal`, `user.reply/2`, `validação`) are all valid, so every
 * name a pipeline could sensibly wait for before this rule stays valid.
 *
 * @example
 * checkSignalName('approval');          // ok
 * checkSignalName('', { runId: 'r1' }); // throws InvalidSignalNameError (code INVALID_SIGNAL_NAME)
 */
export function checkSignalName(name: unknown, where: { runId?: string; step?: string } = {}): asserts name is string {
  const reason = signalNameProblem(name);
  if (reason !== null) throw new InvalidSignalNameError(showName(name), reason, where);
}

/** Why `name` is not a valid signal name, or null when it is. */
export function signalNameProblem(name: unknown): string | null {
  if (typeof name !== 'string') return `it is ${name === null ? 'null' : `of type ${typeof name}`}, not a string`;
  if (name.length === 0) return 'it is empty';
  // A code point takes one or two UTF-16 units: past twice the limit in units it is too long for sure,
  // and a 100,000-character name is refused without being walked.
  const length = name.length > 2 * MAX_SIGNAL_NAME_LENGTH ? Infinity : [...name].length;
  if (length > MAX_SIGNAL_NAME_LENGTH) return `it is longer than ${MAX_SIGNAL_NAME_LENGTH} characters (${name.length} UTF-16 units)`;
  const bad = FORBIDDEN.exec(name);
  if (bad) return `it contains the character U+${bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')} at index ${bad.index}`;
  if (EDGE_SPACE.test(name)) return 'it starts or ends with whitespace';
  return null;
}

/**
 * Throws `SignalPayloadTooLargeError` when a serialized payload is over `limit` bytes of UTF-8.
 *
 * @example
 * checkSignalPayloadSize('r1', 'approval', serialize(payload), DEFAULT_MAX_SIGNAL_PAYLOAD_BYTES);
 */
export function checkSignalPayloadSize(runId: string, name: string, serialized: string | undefined, limit: number): void {
  // A string of n UTF-16 units is at most 3n bytes of UTF-8: short payloads skip the byte count.
  if (serialized === undefined || serialized.length * 3 <= limit) return;
  const bytes = Buffer.byteLength(serialized, 'utf8');
  if (bytes > limit) throw new SignalPayloadTooLargeError(runId, name, bytes, limit);
}

/** A name as a message shows it: quoted and escaped (control characters visible), cut after 40 characters. */
function showName(name: unknown): string {
  if (typeof name === 'number' || typeof name === 'boolean' || typeof name === 'bigint') return String(name);
  if (typeof name !== 'string') return name === null ? 'null' : name === undefined ? 'undefined' : `(a ${typeof name})`;
  const shown = JSON.stringify(name.slice(0, 40)).replace(/^"|"$/g, "'");
  return name.length > 40 ? `${shown.slice(0, -1)}...' (${name.length} characters)` : shown;
}
