import { WaypointError } from '../contract/errors';

export { HttpError, statusForCode } from './http-error';

/**
 * `createHttpHandler` was given options it cannot serve with (no `authorize`, no pipelines, a bad
 * `basePath` or approval key). Thrown when the handler is created, before any request.
 *
 * @example
 * try { createHttpHandler({ waypoint, pipelines: [Chat] } as never); }
 * catch (err) { if (err instanceof HttpConfigError) console.error(err.message); }
 */
export class HttpConfigError extends WaypointError {
  constructor(message: string) {
    super('HTTP_CONFIG', message);
  }
}
