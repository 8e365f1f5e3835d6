import { WaypointError, reasonOf } from '../contract/errors';

export { HttpError, statusForCode } from '../http/http-error';

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
