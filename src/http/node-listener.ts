import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';

/**
 * Adapts a Web-standard handler to Node's `http.createServer` listener. The request body is passed as a
 * stream (the handler bounds what it reads); the response body is written as the handler produces it,
 * waiting for the socket to drain, and a client that goes away aborts `request.signal` (which ends a
 * stream's reader, never the run).
 *
 * @example
 * http.createServer(toNodeListener(createHttpHandler({ waypoint, pipelines: [Chat], authorize }))).listen(3000);
 */
export function toNodeListener(handler: (request: Request) => Promise<Response>): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    void serve(handler, req, res).catch(() => {
      // Headers may already be out; all that is left is to close the connection.
      res.destroy();
    });
  };
}

async function serve(handler: (request: Request) => Promise<Response>, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const gone = new AbortController();
  res.on('close', () => gone.abort());
  const host = req.headers.host ?? 'localhost';
  const protocol = (req.socket as { encrypted?: boolean }).encrypted ? 'https' : 'http';
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (Array.isArray(value)) for (const v of value) headers.append(name, v);
    else if (value !== undefined) headers.set(name, value);
  }
  const method = req.method ?? 'GET';
  const hasBody = method !== 'GET' && method !== 'HEAD';
  // `duplex: 'half'` is what a streamed request body needs in Node's fetch; RequestInit's type lacks it.
  const init: RequestInit & { duplex?: 'half' } = { method, headers, signal: gone.signal };
  if (hasBody) Object.assign(init, { body: Readable.toWeb(req), duplex: 'half' });
  const request = new Request(`${protocol}://${host}${req.url ?? '/'}`, init);
  const response = await handler(request);
  const out: Record<string, string | string[]> = {};
  response.headers.forEach((value, name) => {
    out[name] = value;
  });
  res.writeHead(response.status, out);
  if (response.body === null) {
    res.end();
    return;
  }
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  try {
    for (;;) {
      if (gone.signal.aborted) break;
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) await once(res, 'drain', { signal: gone.signal }).catch(() => undefined);
    }
  } finally {
    // Cancelling the body tells the handler's stream that nobody reads it any more.
    await reader.cancel().catch(() => undefined);
    res.end();
  }
}
