import type { WaypointErrorCode } from './error-codes';

/**
 * Every error Waypoint raises extends {@link WaypointError} and carries a stable `code`, so callers can
 * branch on `err.code` instead of parsing messages. Messages say what happened, to which run and step,
 * and what to do about it.
 *
 * @example
 * try { await waypoint.run(Analysis, { runId, input }); }
 * catch (err) { if (err instanceof WaypointError && err.code === 'RUN_LOCKED') retryLater(); else throw err; }
 */
export class WaypointError extends Error {
  readonly code: WaypointErrorCode;
  readonly runId?: string;
  readonly step?: string;

  constructor(code: WaypointErrorCode, message: string, details: { runId?: string; step?: string; cause?: unknown } = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.code = code;
    this.runId = details.runId;
    this.step = details.step;
  }
}

/**
 * A cause's message as a clause inside another sentence: without its own closing period or trailing space,
 * so "failed: upstream 503." does not end in a doubled period.
 */
export function reasonOf(cause: unknown): string {
  return (cause instanceof Error ? cause.message : String(cause)).replace(/[.\s]+$/, '');
}

/** A stored, JSON form of any thrown value: name, message and code, never the stack. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return JSON.stringify({ name: error.name, message: error.message, code: (error as { code?: unknown }).code ?? null });
  return JSON.stringify({ name: 'Error', message: String(error), code: null });
}
