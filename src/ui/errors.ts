import { WaypointError, reasonOf, type WaypointErrorCode } from '../contract/errors';

/**
 * `startUiServer` was given options it cannot run with (a public bind without a token, a short token,
 * actions without a Waypoint, a bad port). Thrown before anything listens.
 *
 * @example
 * try { await startUiServer({ store, host: '0.0.0.0' }); }
 * catch (err) { if (err instanceof UiConfigError) console.error(err.message); }
 */
export class UiConfigError extends WaypointError {
  constructor(message: string) {
    super('UI_CONFIG', message);
  }
}

/**
 * An HTTP request the UI server refuses: carries the status code and the JSON body's stable `code`.
 * Handlers throw it; the server turns it into `{ "error": { "code", "message" } }`.
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

/**
 * The UI server could not listen (port in use, address not available).
 *
 * @example
 * await startUiServer({ store, port: 4317 }).catch((err) => {
 *   if (err instanceof UiListenError) return startUiServer({ store, port: 0 });
 *   throw err;
 * });
 */
export class UiListenError extends WaypointError {
  constructor(host: string, port: number, cause: unknown) {
    const reason = reasonOf(cause);
    super('UI_LISTEN_FAILED', `The Waypoint UI could not listen on ${host}:${port}: ${reason}. Choose another port (--port) or stop what is using it.`, { cause });
  }
}

/**
 * The compiled page scripts (dist/src/ui/browser, built by `tsc -p tsconfig.browser.json`) are not next
 * to the server: the package was built with the main tsconfig only. Thrown by `startUiServer` before
 * anything listens.
 *
 * @example
 * // npm run build   (tsc -p tsconfig.json && tsc -p tsconfig.browser.json)
 */
export class UiAssetsMissingError extends WaypointError {
  constructor(path: string, cause: unknown) {
    const reason = reasonOf(cause);
    super(
      'UI_ASSETS_MISSING',
      `The Waypoint UI's page script ${path} cannot be read (${reason}). Build it with \`npm run build\` (it runs \`tsc -p tsconfig.browser.json\` after the main build).`,
      { cause },
    );
  }
}
