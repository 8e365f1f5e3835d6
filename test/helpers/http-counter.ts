import { createHash } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';

/** One request as the server saw it. */
export interface ReceivedRequest {
  method: string;
  path: string;
  /** The Idempotency-Key header, or null when absent. */
  key: string | null;
  /** The X-Worker-Pid header: which process sent it. */
  pid: number | null;
  body: Record<string, unknown>;
  /** True when the key had been seen before on this path (the stored response was replayed). */
  replayed: boolean;
}

/**
 * A small local HTTP server of the test's own that behaves like an idempotent API (Stripe-style): a POST
 * with an `Idempotency-Key` already seen on that path gets the first response again (with
 * `Idempotent-Replayed: true`) and changes nothing. Every request is kept, so a test counts deliveries
 * per key. `GET <path>/<key>` answers 200 with the stored response or 404: what a reconcile hook asks.
 * Responses are a pure function of the path, key and body, so an uninterrupted run against another
 * instance gets the same answers.
 *
 * @example
 * const api = await HttpCounter.start();
 * await postJson(`${api.url}/notify`, { to: 'a@b' }, { 'Idempotency-Key': key });
 * api.count(key); // 1
 * await api.close();
 */
export class HttpCounter {
  readonly requests: ReceivedRequest[] = [];
  private readonly responses = new Map<string, Record<string, unknown>>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<HttpCounter> {
    let counter: HttpCounter | undefined;
    const server = createServer((req, res) => {
      counter!.handle(req).then(
        ({ status, body, replayed }) => {
          res.writeHead(status, { 'content-type': 'application/json', ...(replayed ? { 'idempotent-replayed': 'true' } : {}) });
          res.end(JSON.stringify(body));
        },
        (error: unknown) => {
          res.writeHead(400, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: String(error) }));
        },
      );
    });
    // Clients that die mid-request (SIGKILL) reset their sockets; that is expected here.
    server.on('clientError', (_error, socket) => socket.destroy());
    counter = new HttpCounter(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return counter;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  /** POSTs received with this key (on any path). */
  count(key: string): number {
    return this.requests.filter((r) => r.method === 'POST' && r.key === key).length;
  }

  /** POSTs whose body has this `runId`. */
  postsOf(runId: string): ReceivedRequest[] {
    return this.requests.filter((r) => r.method === 'POST' && r.body.runId === runId);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage): Promise<{ status: number; body: Record<string, unknown>; replayed: boolean }> {
    const path = (req.url ?? '/').split('?')[0];
    const method = req.method ?? 'GET';
    if (method === 'GET') {
      const slash = path.lastIndexOf('/');
      const stored = this.responses.get(`${path.slice(0, slash)} ${decodeURIComponent(path.slice(slash + 1))}`);
      return stored ? { status: 200, body: stored, replayed: false } : { status: 404, body: { found: false }, replayed: false };
    }
    const raw = await readBody(req);
    const body = raw === '' ? {} : (JSON.parse(raw) as Record<string, unknown>);
    const key = header(req, 'idempotency-key');
    const pidText = header(req, 'x-worker-pid');
    const stored = key === null ? undefined : this.responses.get(`${path} ${key}`);
    this.requests.push({ method, path, key, pid: pidText === null ? null : Number(pidText), body, replayed: stored !== undefined });
    if (key === null) return { status: 400, body: { error: 'Idempotency-Key header required' }, replayed: false };
    if (stored) return { status: 200, body: stored, replayed: true };
    const response = { id: `${path.slice(1)}_${createHash('sha256').update(`${path} ${key} ${raw}`).digest('hex').slice(0, 16)}`, accepted: body };
    this.responses.set(`${path} ${key}`, response);
    return { status: 200, body: response, replayed: false };
  }
}

function header(req: IncomingMessage, name: string): string | null {
  const value = req.headers[name];
  return typeof value === 'string' ? value : null;
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (data += chunk));
    req.on('end', () => resolve(data));
    req.on('error', reject);
  });
}

/**
 * A JSON request without keep-alive (a child process must not linger on a pooled socket). Resolves with
 * the status and parsed body.
 *
 * @example
 * const { status, body } = await requestJson('POST', `${url}/charges`, { amount: 5 }, { 'Idempotency-Key': key });
 */
export function requestJson(method: 'GET' | 'POST', url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const payload = body === undefined ? '' : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...headers } }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (data += chunk));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: data === '' ? {} : (JSON.parse(data) as Record<string, unknown>) });
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}
