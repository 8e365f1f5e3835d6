import { HttpError } from './errors';

/** Headers on every JSON answer: nothing cached or sniffed, no referrer leaking run ids. */
export const COMMON_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/** A JSON response with the common headers. */
export function json(status: number, value: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(value), { status, headers: { ...COMMON_HEADERS, 'content-type': 'application/json; charset=utf-8', ...headers } });
}

/** `{ "error": { "code", "message" } }` with the status. */
export function errorResponse(status: number, code: string, message: string, headers: Record<string, string> = {}): Response {
  return json(status, { error: { code, message } }, headers);
}

/**
 * A state-changing request from a browser on another site is refused: its `Origin` must be the origin the
 * request was sent to (or one of `allowed`). A request without `Origin` (a server, curl) passes; the
 * JSON content type keeps plain HTML forms out.
 */
export function checkOrigin(request: Request, url: URL, allowed: readonly string[]): void {
  const origin = request.headers.get('origin');
  if (origin === null) return;
  if (origin !== 'null' && (origin === url.origin || allowed.includes(origin))) return;
  throw new HttpError(
    403,
    'ORIGIN_REFUSED',
    `A request from origin '${origin.slice(0, 100)}' may not change runs here; send it from this site, or list the origin in allowedOrigins.`,
  );
}

/** Reads a JSON object body: `Content-Type: application/json`, at most `maxBytes`; an empty body is `{}`. */
export async function readJson(request: Request, maxBytes: number): Promise<Record<string, unknown>> {
  const type = (request.headers.get('content-type') ?? '').split(';')[0].trim().toLowerCase();
  if (type !== 'application/json')
    throw new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', `Send the request body as JSON with 'Content-Type: application/json' (got '${type.slice(0, 60) || 'none'}').`);
  const declared = Number(request.headers.get('content-length') ?? '0');
  if (declared > maxBytes) throw tooLarge(maxBytes);
  const text = await readLimited(request, maxBytes);
  if (text.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new HttpError(400, 'BAD_BODY', 'The request body is not valid JSON; send a JSON object.');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new HttpError(400, 'BAD_BODY', 'The request body must be a JSON object.');
  return parsed as Record<string, unknown>;
}

async function readLimited(request: Request, maxBytes: number): Promise<string> {
  if (request.body === null) return '';
  const reader = (request.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(maxBytes);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function tooLarge(maxBytes: number): HttpError {
  return new HttpError(413, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${maxBytes} bytes; send a smaller body (or raise maxBodyBytes).`);
}

/** Fails with 400 when `body` has keys other than `allowed`. */
export function onlyFields(body: Record<string, unknown>, allowed: readonly string[]): void {
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) {
    const expected = allowed.length === 0 ? 'none are accepted' : `expected ${allowed.map((k) => `'${k}'`).join(', ')}`;
    throw new HttpError(400, 'BAD_BODY', `Unknown body field(s) ${unknown.map((k) => `'${k.slice(0, 40)}'`).join(', ')}; ${expected}.`);
  }
}

/** A path segment, percent-decoded (400 on bad encoding). */
export function segment(text: string, what: string, code: 'INVALID_RUN_ID' | 'INVALID_SIGNAL_NAME' | 'APPROVAL_LINK_INVALID'): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new HttpError(code === 'APPROVAL_LINK_INVALID' ? 403 : 400, code, `The ${what} in the path is not valid percent-encoding; encode it with encodeURIComponent.`);
  }
}
