import { WaypointError } from '../../contract/errors';

/** Longest run id, in UTF-16 code units (`string.length`; an emoji outside the BMP counts 2). */
export const MAX_RUN_ID_LENGTH = 200;

// C0 controls (NUL, tab, newline, ...), DEL, C1 controls (U+0080-U+009F, NEL among them) and the Unicode
// line / paragraph separators: characters that break a log line, a CLI argument or a SQL text column.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Checks a run id given by a caller and throws `INVALID_RUN_ID` (before anything touches a store) unless
 * it follows the run id rule, the same on every backend:
 *
 * - a string of 1 to 200 characters (UTF-16 code units, as `string.length` counts them);
 * - no control character: C0 (U+0000-U+001F: NUL, tab, newline, ...), DEL (U+007F), C1 (U+0080-U+009F)
 *   and no line or paragraph separator (U+2028, U+2029);
 * - no lone UTF-16 surrogate (it has no UTF-8 form: PostgreSQL and Redis could not store it as given);
 * - no leading or trailing whitespace (`' q3-aapl'` is nearly always a copy-paste slip, and would be a
 *   different run from `'q3-aapl'`).
 *
 * Everything else is allowed: any printable Unicode, inner spaces, `/`, `:`, `{`, `}`. The id is a
 * primary key, a Redis key part and an archive file name, so one rule keeps a run reachable everywhere.
 *
 * @example
 * checkRunId('q3-aapl');        // 'q3-aapl'
 * checkRunId('q3\u0000aapl');   // throws WaypointError { code: 'INVALID_RUN_ID' }
 */
export function checkRunId(runId: unknown, what = 'runId'): string {
  const refuse = (why: string): never => {
    throw new WaypointError(
      'INVALID_RUN_ID',
      `${what} ${display(runId)} is not a valid run id: ${why}. A run id is 1 to ${MAX_RUN_ID_LENGTH} printable characters without control characters or leading/trailing spaces.`,
    );
  };
  if (typeof runId !== 'string') return refuse(`it is ${runId === null ? 'null' : typeof runId}, not a string`);
  if (runId.length === 0) return refuse('it is empty');
  if (runId.length > MAX_RUN_ID_LENGTH) return refuse(`it is ${runId.length} characters long`);
  const control = CONTROL.exec(runId);
  if (control) return refuse(`it contains the control character ${codePoint(control[0])} at index ${control.index}`);
  const lone = LONE_SURROGATE.exec(runId);
  if (lone) return refuse(`it contains a lone UTF-16 surrogate ${codePoint(lone[0])} at index ${lone.index}`);
  if (/^\s|\s$/.test(runId)) return refuse('it starts or ends with whitespace');
  return runId;
}

function codePoint(char: string): string {
  return `U+${char.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The given value, quoted, with what cannot be printed escaped, and cut short when it is long. */
function display(value: unknown): string {
  if (typeof value !== 'string') return value === undefined ? 'undefined' : (JSON.stringify(value) ?? typeof value);
  const shown = value.length > 60 ? `${value.slice(0, 60)}...` : value;
  return `'${shown.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\uD800-\uDFFF']/g, (c) => (c === "'" ? "\\'" : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`))}'`;
}
