import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Class } from '../decorators/options';
import { WaypointError } from '../contract/errors';
import { JsonLogger, type Logger } from '../contract/logger';
import { readPlan, type PipelinePlan } from '../core/plan/plan-reader';
import type { Waypoint } from '../composition/waypoint';
import type { CheckpointStore } from '../contract/checkpoint-store';
import { UiActions } from './actions';
import { APP_CSS } from './assets/app-css';
import { loginPage, PAGE_HTML } from './assets/page-html';
import { Gate, isLoopback, loopbackHosts, resolveToken } from './auth';
import { HttpError, statusForCode, UiConfigError, UiListenError } from './errors';
import { CONTENT_SECURITY_POLICY, parseRunId, parseSequence, readJsonBody, readText, send, sendError, sendJson, onlyKeys } from './http-io';
import { pageScript } from './page-assets';
import { ReadApi } from './read-api';
import { serveRunStream, type OpenStreams } from './stream-endpoint';
import { parseStepsPageQuery, parseWindowQuery } from './steps-window';

/** Options of {@link startUiServer}. */
export interface UiServerOptions {
  /** The store to show. With an encrypted Waypoint, pass `waypoint.store` (it decrypts). */
  store: CheckpointStore;
  /** Default 4317; 0 picks a free port. */
  port?: number;
  /** Default 127.0.0.1. Any other address requires a token. */
  host?: string;
  /** Bearer token for every request; default WAYPOINT_UI_TOKEN. At least 16 characters. */
  token?: string;
  /** Enables POST resume / cancel / fork / signal (403 otherwise). Needs `waypoint`. */
  allowActions?: boolean;
  /** The facade the actions go through; its registered pipelines are the ones `resume` can run. */
  waypoint?: Waypoint;
  /** Pipeline classes: progress as steps done / total, pending steps on the timeline; registered with `waypoint` too. */
  pipelines?: Class[];
  /** Key the rows were sealed with (`hmacKey` of the Waypoint), to verify HMAC-sealed rows. */
  hmacKey?: string | Buffer;
  /** Idle gaps shorter than this are never shown as resume points (default 100 ms). */
  resumeGapMs?: number;
  /** Request log (method, route pattern, status, duration; never paths or query strings). Default JsonLogger. */
  logger?: Logger;
}

/** A running UI server. */
export interface UiServer {
  /** Where the page is, e.g. `http://127.0.0.1:4317/`. */
  url: string;
  port: number;
  /** Pauses resumes started from the page, stops accepting requests and closes connections. */
  close(): Promise<void>;
}

interface Route {
  method: 'GET' | 'POST';
  /** The pattern logged instead of the path, so run ids never reach the logs. */
  pattern: string;
  regex: RegExp;
  handle(req: IncomingMessage, res: ServerResponse, params: string[], url: URL): Promise<void> | void;
}

/**
 * Starts the run timeline UI: a self-contained page and its JSON API over a checkpoint store.
 *
 * @example
 * const ui = await startUiServer({ store: waypoint.store, waypoint, pipelines: [FinancialAnalysis], allowActions: true });
 * console.log(`Waypoint UI at ${ui.url}`);
 * process.once('SIGINT', () => void ui.close());
 */
export async function startUiServer(options: UiServerOptions): Promise<UiServer> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 4317;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UiConfigError(`The port must be an integer from 0 to 65535, got ${String(port)}.`);
  if (!options.store) throw new UiConfigError('startUiServer needs a checkpoint store (the `store` option).');
  if (options.allowActions && !options.waypoint) throw new UiConfigError('allowActions needs the `waypoint` option: resume, cancel and fork go through the Waypoint facade.');
  const token = resolveToken(options.token, host);
  const logger = options.logger ?? new JsonLogger();
  const plans = new Map<string, PipelinePlan>();
  for (const pipeline of options.pipelines ?? []) {
    const plan = readPlan(pipeline);
    plans.set(plan.name, plan);
    options.waypoint?.register(pipeline);
  }
  // Read before listening, so a build without the page scripts fails here rather than on the first visit.
  const appJs = pageScript();
  const hmacKey = options.hmacKey === undefined ? undefined : Buffer.isBuffer(options.hmacKey) ? options.hmacKey : Buffer.from(options.hmacKey, 'utf8');
  const api = new ReadApi(options.store, { plans, integrity: hmacKey ? { hmacKey } : {}, minGapMs: options.resumeGapMs, actionsAllowed: options.allowActions === true });
  const actions = options.allowActions ? new UiActions(options.waypoint!, logger) : undefined;

  const server = createServer();
  const listening = await listen(server, host, port);
  // Without a token, answer only to this server's own names: another site resolving to 127.0.0.1
  // (DNS rebinding) must not read run data through the visitor's browser.
  const gate = new Gate(token, token === undefined && isLoopback(host) ? loopbackHosts(host, listening) : undefined);
  const streams: OpenStreams = new Set();
  const routes = buildRoutes(api, actions, gate, appJs, (req, res, runId, url) => serveRunStream(options.store, req, res, runId, url, streams));

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    let pattern = 'unmatched';
    res.on('finish', () => {
      const fields = { method: req.method, route: pattern, status: res.statusCode, ms: Math.round(performance.now() - started) };
      if (res.statusCode >= 500) logger.error('ui request failed', fields);
      else if (req.method === 'POST') logger.info('ui request', fields);
      else logger.debug('ui request', fields);
    });
    void handle(req, res, routes, gate, (p) => (pattern = p)).catch((error: unknown) => {
      logger.error('ui request error', { route: pattern, error: error instanceof Error ? error.message : String(error) });
      if (!res.headersSent) sendError(res, 500, 'INTERNAL', 'The UI server failed to answer; see its log.');
      else res.destroy();
    });
  });

  const shownHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shownHost}:${listening}/`,
    port: listening,
    async close() {
      await actions?.close();
      for (const stream of streams) stream.abort();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

async function handle(req: IncomingMessage, res: ServerResponse, routes: Route[], gate: Gate, setPattern: (p: string) => void): Promise<void> {
  if (!gate.hostAllowed(req)) {
    sendError(res, 403, 'FORBIDDEN_HOST', 'This UI answers only to its own address (Host header); open it through the URL it printed.');
    return;
  }
  let url: URL;
  try {
    url = new URL(req.url ?? '/', 'http://ui.invalid');
  } catch {
    sendError(res, 400, 'BAD_REQUEST', 'The request URL cannot be parsed.');
    return;
  }
  const matches = routes.map((route) => ({ route, params: route.regex.exec(url.pathname) })).filter((m) => m.params !== null);
  const match = matches.find((m) => m.route.method === req.method);
  if (match) setPattern(match.route.pattern);
  const isApi = url.pathname.startsWith('/api/');
  const isLogin = url.pathname === '/login' || (url.pathname === '/' && url.searchParams.has('token'));
  // The static script and style hold no run data; the sign-in page needs the style.
  const isAsset = url.pathname.startsWith('/assets/');
  if (!gate.authorized(req) && !isLogin && !isAsset) {
    if (isApi) sendError(res, 401, 'UNAUTHORIZED', 'This UI requires a token: send `Authorization: Bearer <token>`.', { 'www-authenticate': 'Bearer realm="waypoint-ui"' });
    else send(res, 401, 'text/html; charset=utf-8', loginPage(false), { 'content-security-policy': CONTENT_SECURITY_POLICY });
    return;
  }
  if (!match) {
    if (matches.length > 0) {
      const allow = [...new Set(matches.map((m) => m.route.method))].join(', ');
      sendError(res, 405, 'METHOD_NOT_ALLOWED', `${req.method} is not supported here; use ${allow}.`, { allow });
    } else {
      sendError(
        res,
        404,
        'NOT_FOUND',
        isApi
          ? 'No such API endpoint. The API has /api/runs, /api/runs/:id, /api/runs/:id/children, /api/runs/:id/stream and /api/runs/:id/checkpoints/:sequence.'
          : 'No such page; the UI is at /.',
      );
    }
    return;
  }
  if (req.method === 'POST' && !gate.originAllowed(req)) {
    sendError(res, 403, 'FORBIDDEN_ORIGIN', 'Cross-site requests are refused; use the page served by this UI.');
    return;
  }
  try {
    await match.route.handle(req, res, match.params!.slice(1), url);
  } catch (error) {
    if (error instanceof HttpError) sendError(res, error.status, error.code, error.message, error.headers);
    else if (error instanceof WaypointError) sendError(res, statusForCode(error.code), error.code, error.message);
    else throw error;
  }
}

/** Largest body of a signal action: the default payload limit (256 KiB) with room for JSON escaping. */
const SIGNAL_BODY_MAX_BYTES = 1024 * 1024;

/** Serves `GET /api/runs/:id/stream` (./stream-endpoint.ts). */
type StreamRoute = (req: IncomingMessage, res: ServerResponse, runId: string, url: URL) => Promise<void>;

function buildRoutes(api: ReadApi, actions: UiActions | undefined, gate: Gate, appJs: string, stream: StreamRoute): Route[] {
  const route = (method: Route['method'], pattern: string, handle: Route['handle']): Route => {
    const regex = new RegExp('^' + pattern.replace(/\./g, '\\.').replace(/:[a-z]+/g, '([^/]+)') + '$');
    return { method, pattern, regex, handle };
  };
  const noQuery = (url: URL) => onlyKeys('query', url.searchParams.keys(), []);
  const action = (name: 'resume' | 'cancel' | 'fork' | 'signal') =>
    route('POST', `/api/runs/:id/${name}`, async (req, res, [id], url) => {
      noQuery(url);
      if (!actions)
        throw new HttpError(403, 'ACTIONS_DISABLED', 'Actions are disabled; start the UI with --allow-actions (allowActions: true) to resume, cancel, signal or fork runs.');
      const runId = parseRunId(id);
      // A signal's body carries its payload: room for one at the facade's limit, which answers 413 past it.
      const out = await actions[name](runId, await readJsonBody(req, name === 'signal' ? SIGNAL_BODY_MAX_BYTES : undefined));
      sendJson(res, out.status, out.body);
    });
  const page = (html: string) => (_req: IncomingMessage, res: ServerResponse) => {
    send(res, 200, 'text/html; charset=utf-8', html, { 'content-security-policy': CONTENT_SECURITY_POLICY });
    return Promise.resolve();
  };
  return [
    route('GET', '/', async (req, res, _params, url) => {
      const presented = url.searchParams.get('token');
      if (presented === null || !gate.enabled) return page(PAGE_HTML)(req, res);
      // `/?token=...` (the link a CLI prints): trade the token for a session cookie and drop it from the address bar.
      if (gate.matches(presented)) send(res, 303, 'text/plain; charset=utf-8', 'Signed in.', { location: '/', 'set-cookie': gate.sessionCookie() });
      else send(res, 401, 'text/html; charset=utf-8', loginPage(true), { 'content-security-policy': CONTENT_SECURITY_POLICY });
    }),
    route('POST', '/login', async (req, res) => {
      const form = new URLSearchParams(await readText(req, 4096));
      const presented = form.get('token') ?? '';
      if (gate.enabled && gate.matches(presented)) send(res, 303, 'text/plain; charset=utf-8', 'Signed in.', { location: '/', 'set-cookie': gate.sessionCookie() });
      else if (!gate.enabled) send(res, 303, 'text/plain; charset=utf-8', 'No token is required.', { location: '/' });
      else send(res, 401, 'text/html; charset=utf-8', loginPage(true), { 'content-security-policy': CONTENT_SECURITY_POLICY });
    }),
    route('GET', '/assets/app.js', (_req, res) => send(res, 200, 'text/javascript; charset=utf-8', appJs)),
    route('GET', '/assets/app.css', (_req, res) => send(res, 200, 'text/css; charset=utf-8', APP_CSS)),
    route('GET', '/api/runs', async (_req, res, _params, url) => sendJson(res, 200, await api.listRuns(url.searchParams))),
    route('GET', '/api/runs/:id', async (_req, res, [id], url) => {
      const window = parseWindowQuery(url.searchParams);
      sendJson(res, 200, await api.runDetail(parseRunId(id), window));
    }),
    route('GET', '/api/runs/:id/steps', async (_req, res, [id], url) => {
      const { before, limit } = parseStepsPageQuery(url.searchParams);
      sendJson(res, 200, await api.stepsPage(parseRunId(id), before, limit));
    }),
    route('GET', '/api/runs/:id/children', async (_req, res, [id], url) => {
      noQuery(url);
      sendJson(res, 200, await api.children(parseRunId(id)));
    }),
    route('GET', '/api/runs/:id/stream', (req, res, [id], url) => stream(req, res, parseRunId(id), url)),
    route('GET', '/api/runs/:id/checkpoints/:seq', async (_req, res, [id, seq], url) => {
      noQuery(url);
      sendJson(res, 200, await api.checkpoint(parseRunId(id), parseSequence(seq)));
    }),
    action('resume'),
    action('cancel'),
    action('fork'),
    action('signal'),
  ];
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(new UiListenError(host, port, error));
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
