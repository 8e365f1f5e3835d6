import { plainText } from './request-outline';

/**
 * What a `durable()` call threw, in the form it is stored and replayed: an Error's name, message, text
 * (what `String(error)` gave, kept only when a custom `toString` made it differ from `name: message`) and
 * its own primitive fields (`code`, `status`, `statusCode`...); or a thrown non-Error value as JSON. This is
 * what a caller that turns errors into text sees (the AI SDK puts `String(error)` into a tool-error part),
 * so a replay gives it the same text. The stack and the cause are not kept: they name code, not outcome.
 */
export type RecordedError = { name: string; message: string; text?: string; fields?: Record<string, string | number | boolean | null> } | { value: unknown };

const SKIPPED_FIELDS = new Set(['name', 'message', 'stack', 'cause']);
const MAX_FIELD_CHARS = 1000;

/** The storable form of a thrown value. */
export function recordError(error: unknown): RecordedError {
  if (!(error instanceof Error)) return { value: jsonCopy(error) };
  const recorded: { name: string; message: string; text?: string; fields?: Record<string, string | number | boolean | null> } = {
    name: error.name,
    message: error.message,
  };
  const fields: Record<string, string | number | boolean | null> = {};
  for (const [key, value] of Object.entries(error)) {
    if (SKIPPED_FIELDS.has(key)) continue;
    const kept =
      value === null || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value)) || (typeof value === 'string' && value.length <= MAX_FIELD_CHARS);
    if (kept) fields[key] = value as string | number | boolean | null;
  }
  if (Object.keys(fields).length > 0) recorded.fields = fields;
  const text = safeText(error);
  if (text !== String(rebuildError(recorded))) recorded.text = text;
  return recorded;
}

/** The error a replay throws: an Error with the recorded name, message, fields and text (or the thrown value). */
export function rebuildError(recorded: RecordedError): unknown {
  if ('value' in recorded) return recorded.value;
  // plain Error: rebuilds the caller's own recorded error for replay; its message is theirs.
  const error = new Error(recorded.message);
  Object.defineProperty(error, 'name', { value: recorded.name, writable: true, configurable: true, enumerable: false });
  if (recorded.fields) Object.assign(error, recorded.fields);
  const text = recorded.text;
  if (text !== undefined) Object.defineProperty(error, 'toString', { value: () => text, writable: true, configurable: true, enumerable: false });
  return error;
}

/** Whether a stored value has the shape {@link recordError} writes (a record read back from the store). */
export function isRecordedError(value: unknown): value is RecordedError {
  if (typeof value !== 'object' || value === null) return false;
  if ('value' in value) return true;
  const v = value as { name?: unknown; message?: unknown };
  return typeof v.name === 'string' && typeof v.message === 'string';
}

function safeText(error: Error): string {
  try {
    return String(error);
  } catch {
    return `${error.name}: ${error.message}`;
  }
}

/** A thrown non-Error value as JSON data (what the AI SDK's `JSON.stringify` of it shows), or its text. */
function jsonCopy(value: unknown): unknown {
  if (value === undefined) return null; // stored as an absent key otherwise; the AI SDK shows both as 'unknown error'
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' || value === null) return value;
  try {
    const text = JSON.stringify(value);
    return text === undefined ? plainText(value) : (JSON.parse(text) as unknown);
  } catch {
    return plainText(value);
  }
}
