import { WaypointError, describeError } from '../contract/errors';
import { TOKENS } from '../contract/tokens';
import { approve } from './approval-route';
import { HttpError, statusForCode } from './errors';
import { resolveOptions, type HttpHandlerOptions, type ResolvedHttpOptions } from './options';
import { errorResponse, segment } from './request-io';
import { cancelRun, readRun, signalRun, startRun, streamRun, type RouteContext } from './run-routes';
import { RunStarter } from './run-starter';
import { parseRunId } from './http-error';

/** A Web-standard request handler, with a way to wait for the runs it started in this process. */
export interface HttpHandler {
  (request: Request): Promise<Response>;
  /** Resolves once every run this handler started or woke in this process has settled (for a graceful shutdown). */
  settled(): Promise<void>;
}

/**
 * The web face of a Waypoint: start, read, stream, signal, cancel and approve runs over HTTP, as a
 * Web-standard `(request: Request) => Promise<Response>` (Next.js and Remix route handlers, Hono, Bun,
 * Deno; Node's http server through `toNodeListener`). Routes, under `basePath`: `POST /runs`,
 * `GET /runs/:id`, `GET /runs/:id/stream`, `POST /runs/:id/signals/:name`, `POST /runs/:id/cancel`,
 * `POST /approve/:token` (docs/http.md).
 *
 * @example
 * const handler = createHttpHandler({ waypoint, pipelines: [Chat], authorize: async (req) => ((await session(req)) ? { tenant: 'acme' } : false), basePath: '/api' });
 * export const GET = handler, POST = handler; // app/api/[...path]/route.ts
 */
export function createHttpHandler(options: HttpHandlerOptions): HttpHandler {
  const resolved = resolveOptions(options);
  const starter = new RunStarter(resolved);
  const logger = resolved.waypoint.container.get(TOKENS.Logger);
  const handler = async (request: Request): Promise<Response> => {
    try {
      return await route({ options: resolved, starter, request, url: new URL(request.url) });
    } catch (error) {
      if (error instanceof HttpError) return errorResponse(error.status, error.code, error.message, error.headers);
      if (error instanceof WaypointError) return errorResponse(statusOf(error.code), error.code, error.message);
      logger.error('HTTP request failed', { method: request.method, url: request.url, error: describeError(error) });
      return errorResponse(500, 'INTERNAL', 'The request failed on the server; see its log.');
    }
  };
  return Object.assign(handler, { settled: () => starter.settled() });
}

async function route(context: RouteContext): Promise<Response> {
  const parts = pathParts(context.options, context.url);
  const method = context.request.method.toUpperCase();
  const want = (allowed: string) => {
    if (method !== allowed) throw new HttpError(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed here; use ${allowed}.`, { headers: { allow: allowed } });
  };
  if (parts.length === 1 && parts[0] === 'runs') return (want('POST'), startRun(context));
  if (parts.length === 2 && parts[0] === 'approve') return (want('POST'), approve(context, segment(parts[1], 'approval token', 'APPROVAL_LINK_INVALID')));
  if (parts[0] === 'runs' && parts.length >= 2 && parts.length <= 4) {
    const runId = parseRunId(parts[1]);
    if (parts.length === 2) return (want('GET'), readRun(context, runId));
    if (parts.length === 3 && parts[2] === 'stream') return (want('GET'), streamRun(context, runId));
    if (parts.length === 3 && parts[2] === 'cancel') return (want('POST'), cancelRun(context, runId));
    if (parts.length === 4 && parts[2] === 'signals') return (want('POST'), signalRun(context, runId, segment(parts[3], 'signal name', 'INVALID_SIGNAL_NAME')));
  }
  throw new HttpError(404, 'ROUTE_NOT_FOUND', `No route ${method} ${context.url.pathname.slice(0, 200)}; the routes are listed in docs/http.md.`);
}

function pathParts(options: ResolvedHttpOptions, url: URL): string[] {
  let path = url.pathname;
  if (options.basePath !== '') {
    if (path !== options.basePath && !path.startsWith(`${options.basePath}/`)) {
      throw new HttpError(404, 'ROUTE_NOT_FOUND', `The path is outside this handler's basePath '${options.basePath}'; mount the handler there or change basePath.`);
    }
    path = path.slice(options.basePath.length);
  }
  return path.split('/').filter((part) => part !== '');
}

/** HTTP status of a WaypointError from the runtime, with the codes the UI's table leaves at 500. */
function statusOf(code: WaypointError['code']): number {
  if (code === 'INPUT_MISMATCH') return 409;
  if (code === 'INVALID_ARGUMENT' || code === 'INVALID_STATE' || code === 'UNDECLARED_STATE') return 400;
  if (code === 'QUEUE_UNAVAILABLE' || code === 'QUEUE_SEND_FAILED' || code === 'QUEUE_CLOSED') return 503;
  return statusForCode(code);
}
