import type { Waypoint } from '../composition/waypoint';
import type { Class } from '../decorators/options';
import { readPlan } from '../core/plan/plan-reader';
import type { RunInfo } from '../composition/run-info';
import { HttpConfigError } from './errors';

/** What a request asks to do; `authorize` gets it with the run and pipeline concerned. */
export type HttpAction = 'start' | 'read' | 'stream' | 'signal' | 'cancel' | 'approve';

/** The second argument of `authorize`. `runId` and `pipeline` are absent when not known (an unknown run). */
export interface AuthorizeContext {
  action: HttpAction;
  runId?: string;
  pipeline?: string;
  /** The signal a `signal` or `approve` request delivers. */
  signal?: string;
}

/**
 * What `authorize` decides: `false` (or nothing) refuses with 401; `true` allows without a tenant (every
 * run is visible: single-tenant apps, admin tools); `{ tenant }` allows within that tenant: runs are
 * created under it, and a run of another tenant (or of none) answers 404.
 */
export type Authorization = boolean | { tenant: string } | null | undefined;

/** Decides every request: read the session cookie or bearer token from `request` and check it. */
export type Authorize = (request: Request, context: AuthorizeContext) => Authorization | Promise<Authorization>;

/** The explicit opt-out of authorization, for local demos and tests only: every request is allowed. */
export const UNSAFE_ALLOW_ALL = 'UNSAFE_allow_all';

/** What a client may see of a run: a function of its latest state; its return value (JSON) is sent. */
export type ClientView = (state: Record<string, unknown>, run: RunInfo) => unknown;

/** A pipeline the handler starts, with what clients may see of its runs. */
export interface HttpPipeline {
  pipeline: Class;
  /** The state a client may read (`GET /runs/:id` answers it as `view`, and as `result` once completed). Default: none. */
  clientView?: ClientView;
}

/** Options of `createHttpHandler`. */
export interface HttpHandlerOptions {
  waypoint: Waypoint;
  /** The pipelines `POST /runs` may start, by their `@Pipeline` name; runs of others are not served. */
  pipelines: (Class | HttpPipeline)[];
  /** Called for every request; see {@link Authorization}. `'UNSAFE_allow_all'` turns authorization off. */
  authorize: Authorize | typeof UNSAFE_ALLOW_ALL;
  /** Path prefix the handler is mounted under, e.g. '/api/waypoint'. Default ''. */
  basePath?: string;
  /** Key for approval tokens (at least 32 bytes). Default: the Waypoint's `hmacKey`. */
  approvalKey?: string | Buffer;
  /** Origins besides the request's own that may send state-changing requests (e.g. 'https://app.example.com'). */
  allowedOrigins?: string[];
  /** Largest request body, in bytes. Default 64 KiB (a signal's payload is further bounded by `maxSignalPayloadBytes`). */
  maxBodyBytes?: number;
  /** Comment lines keeping an idle stream open through proxies, every this many ms. Default 15000. */
  heartbeatMs?: number;
}

/** The options, checked and resolved. */
export interface ResolvedHttpOptions {
  waypoint: Waypoint;
  pipelines: Map<string, { pipeline: Class; clientView?: ClientView }>;
  authorize: Authorize;
  basePath: string;
  approvalKey: Buffer | undefined;
  allowedOrigins: string[];
  maxBodyBytes: number;
  heartbeatMs: number;
}

const MIN_KEY_BYTES = 32;

/** Checks the options, throwing {@link HttpConfigError} for what cannot be served. */
export function resolveOptions(options: HttpHandlerOptions): ResolvedHttpOptions {
  if (!options || typeof options.waypoint?.stream !== 'function') throw new HttpConfigError('createHttpHandler needs { waypoint }: pass the Waypoint whose runs it serves.');
  const authorize = resolveAuthorize(options.authorize);
  if (!Array.isArray(options.pipelines) || options.pipelines.length === 0)
    throw new HttpConfigError('createHttpHandler needs { pipelines: [...] }: list the pipeline classes clients may start.');
  const pipelines = new Map<string, { pipeline: Class; clientView?: ClientView }>();
  for (const entry of options.pipelines) {
    const spec = typeof entry === 'function' ? { pipeline: entry } : entry;
    const name = readPlan(spec.pipeline).name;
    pipelines.set(name, spec);
    options.waypoint.register(spec.pipeline);
  }
  const basePath = (options.basePath ?? '').replace(/\/+$/, '');
  if (basePath !== '' && !/^\/[\w\-./~]*$/.test(basePath)) throw new HttpConfigError(`basePath '${basePath}' must start with '/' and hold only path characters; e.g. '/api/runs'.`);
  return {
    waypoint: options.waypoint,
    pipelines,
    authorize,
    basePath,
    approvalKey: resolveKey(options.approvalKey),
    allowedOrigins: options.allowedOrigins ?? [],
    maxBodyBytes: positive(options.maxBodyBytes, 64 * 1024, 'maxBodyBytes'),
    heartbeatMs: positive(options.heartbeatMs, 15_000, 'heartbeatMs'),
  };
}

function resolveAuthorize(given: HttpHandlerOptions['authorize']): Authorize {
  if (given === UNSAFE_ALLOW_ALL) return () => true;
  if (typeof given !== 'function') {
    throw new HttpConfigError(
      "createHttpHandler needs { authorize }: a function that checks each request's credentials and returns true, { tenant } or false. For a local demo only, pass authorize: 'UNSAFE_allow_all'.",
    );
  }
  return given;
}

function resolveKey(key: string | Buffer | undefined): Buffer | undefined {
  if (key === undefined) return undefined;
  const bytes = Buffer.isBuffer(key) ? key : Buffer.from(key, 'utf8');
  if (bytes.length < MIN_KEY_BYTES) throw new HttpConfigError(`approvalKey has ${bytes.length} bytes; use at least ${MIN_KEY_BYTES} (e.g. \`openssl rand -hex 32\`).`);
  return bytes;
}

function positive(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!(Number.isSafeInteger(value) && value > 0)) throw new HttpConfigError(`${name} must be a positive whole number, got ${String(value)}; omit it for the default.`);
  return value;
}
