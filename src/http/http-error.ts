import { WaypointError, type WaypointErrorCode } from '../contract/errors';
import { checkRunId } from '../core/run/run-id';

/*
 * The request errors both HTTP faces share: src/ui (the timeline page) and src/http (the handler) import them from here.
 */

/**
 * An HTTP request a face refuses (the timeline page's API, the HTTP handler): carries the status code and the JSON body's stable `code`.
 * Handlers throw it; the face turns it into `{ "error": { "code", "message" } }`.
 *
 * @example
 * throw new HttpError(400, 'BAD_QUERY', "Query parameter 'limit' must be an integer from 1 to 1000, got 'abc'.");
 */
export class HttpError extends WaypointError {
  readonly status: number;
  readonly headers: Record<string, string>;

  constructor(status: number, code: WaypointErrorCode, message: string, details: { runId?: string; headers?: Record<string, string> } = {}) {
    super(code, message, { runId: details.runId });
    this.status = status;
    this.headers = details.headers ?? {};
  }
}

/** HTTP status for a WaypointError raised by the store or the facade (an action, a read). */
export function statusForCode(code: WaypointErrorCode): number {
  switch (code) {
    case 'RUN_NOT_FOUND':
    case 'NO_SUCH_CHECKPOINT':
      return 404;
    case 'INVALID_RUN_ID':
    case 'NO_SUCH_STEP':
    case 'INVALID_STATE':
    case 'UNSERIALIZABLE_VALUE':
    case 'INVALID_SIGNAL_NAME':
      return 400;
    case 'SIGNAL_PAYLOAD_TOO_LARGE':
      return 413;
    case 'RUN_EXISTS':
    case 'RUN_LOCKED':
    case 'RUN_CANCELLED':
    case 'RUN_FINISHED':
    case 'INVALID_TRANSITION':
    case 'PIPELINE_NOT_REGISTERED':
    case 'PIPELINE_MISMATCH':
    case 'VERSION_MISMATCH':
    case 'PLAN_MISMATCH':
    case 'CHECKPOINT_CORRUPTED':
    case 'LEASE_LOST':
    case 'RESUME_IN_PROGRESS':
      return 409;
    case 'STORE_UNAVAILABLE':
      return 503;
    case 'STREAMS_UNSUPPORTED':
      return 501;
    case 'STORE_REJECTED':
      return 500;
    default:
      return 500;
  }
}

/** Run ids as the runtime accepts them (the rule of `checkRunId`), refused with 400 before any store read. */
export function parseRunId(segment: string): string {
  let runId: string;
  try {
    runId = decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'INVALID_RUN_ID', 'The run id in the path is not valid percent-encoding.');
  }
  try {
    return checkRunId(runId, 'The run id in the path');
  } catch (error) {
    throw new HttpError(400, 'INVALID_RUN_ID', (error as Error).message);
  }
}
