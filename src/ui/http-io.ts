import type { IncomingMessage, ServerResponse } from 'node:http';
import { TERMINAL_STATUSES, type RunFilter, type RunStatus } from '../contract/checkpoint-store';
import { HttpError } from './errors';

export { parseRunId } from '../http/http-error';

/** Headers on every response: nothing cached, nothing sniffed, no framing, no referrer leaking run ids. */
const COMMON_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

/** The page loads only its own script and style; bars are positioned through the CSSOM, which CSP allows. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

export function send(res: ServerResponse, status: number, contentType: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  res.writeHead(status, { ...COMMON_HEADERS, 'content-type': contentType, 'content-length': String(payload.length), ...headers });
  res.end(payload);
}

export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  send(res, status, 'application/json; charset=utf-8', JSON.stringify(value), headers);
}

export function sendError(res: ServerResponse, status: number, code: string, message: string, headers: Record<string, string> = {}): void {
  sendJson(res, status, { error: { code, message } }, headers);
}

const MAX_BODY_BYTES = 16 * 1024;

/** Reads a JSON object body (at most `maxBytes`, 16 KiB by default, `Content-Type: application/json`); an empty body is `{}`. */
export async function readJsonBody(req: IncomingMessage, maxBytes = MAX_BODY_BYTES): Promise<Record<string, unknown>> {
  const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  // Requiring JSON also keeps plain HTML forms on other sites from posting here (they cannot send it).
  if (type !== 'application/json')
    throw new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', `Send the request body as JSON with 'Content-Type: application/json' (got '${type || 'none'}').`);
  const text = await readText(req, maxBytes);
  if (text.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new HttpError(400, 'BAD_BODY', 'The request body is not valid JSON.');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new HttpError(400, 'BAD_BODY', 'The request body must be a JSON object.');
  return parsed as Record<string, unknown>;
}

/** Reads a body as UTF-8 text, failing with 413 past `maxBytes`. */
export function readText(req: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on('data', (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > maxBytes) {
        failed = true;
        reject(new HttpError(413, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${maxBytes} bytes.`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => failed || resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', (error) => failed || reject(error));
  });
}

/** Fails with 400 when the body or query holds keys other than `allowed`. */
export function onlyKeys(what: string, keys: Iterable<string>, allowed: readonly string[]): void {
  const unknown = [...keys].filter((k) => !allowed.includes(k));
  if (unknown.length > 0) {
    const expected = allowed.length === 0 ? 'none are accepted' : `expected ${allowed.map((k) => `'${k}'`).join(', ')}`;
    throw new HttpError(400, what === 'query' ? 'BAD_QUERY' : 'BAD_BODY', `Unknown ${what} parameter(s) ${unknown.map((k) => `'${k}'`).join(', ')}; ${expected}.`);
  }
}

/** A checkpoint sequence in the path: a non-negative integer. */
export function parseSequence(segment: string): number {
  if (!/^\d{1,9}$/.test(segment)) throw new HttpError(400, 'BAD_SEQUENCE', `A checkpoint sequence is a non-negative integer; got '${segment.slice(0, 40)}'.`);
  return Number(segment);
}

const STATUSES: readonly RunStatus[] = ['running', 'paused', 'waiting', 'completed', 'failed', 'cancelled'];
export const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1000;

/**
 * `GET /api/runs` query: `status` (one or a comma-separated list), `pipeline` (exact name), `limit`
 * (1..1000, default 100). Anything else, or a parameter given twice, is a 400.
 */
export function parseRunsQuery(params: URLSearchParams): RunFilter & { limit: number } {
  onlyKeys('query', params.keys(), ['status', 'pipeline', 'limit']);
  const single = (name: string): string | undefined => {
    const values = params.getAll(name);
    if (values.length > 1) throw new HttpError(400, 'BAD_QUERY', `Query parameter '${name}' was given ${values.length} times; give it once.`);
    return values[0];
  };
  const filter: RunFilter & { limit: number } = { limit: DEFAULT_LIST_LIMIT };
  const status = single('status');
  if (status !== undefined) {
    const list = status.split(',').map((s) => s.trim());
    const bad = list.filter((s) => !STATUSES.includes(s as RunStatus));
    if (bad.length > 0 || list.length === 0) {
      throw new HttpError(400, 'BAD_QUERY', `Query parameter 'status' must be one or more of ${STATUSES.join(', ')} (comma-separated); got '${status.slice(0, 80)}'.`);
    }
    filter.status = [...new Set(list)] as RunStatus[];
  }
  const pipeline = single('pipeline');
  if (pipeline !== undefined) {
    if (pipeline.length === 0 || pipeline.length > 200) throw new HttpError(400, 'BAD_QUERY', "Query parameter 'pipeline' must be a pipeline name of 1 to 200 characters.");
    filter.pipelineName = pipeline;
  }
  const limit = single('limit');
  if (limit !== undefined) {
    const n = /^\d{1,4}$/.test(limit) ? Number(limit) : NaN;
    if (!(n >= 1 && n <= MAX_LIST_LIMIT))
      throw new HttpError(400, 'BAD_QUERY', `Query parameter 'limit' must be an integer from 1 to ${MAX_LIST_LIMIT}; got '${limit.slice(0, 40)}'.`);
    filter.limit = n;
  }
  return filter;
}

/** True when the run is still moving or may move on its own (the page keeps refreshing). */
export function isActive(status: RunStatus): boolean {
  return !TERMINAL_STATUSES.has(status) && status !== 'paused';
}
