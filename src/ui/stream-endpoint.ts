import { once } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CheckpointStore } from '../contract/checkpoint-store';
import { RunNotFoundError, StreamsUnsupportedError, WaypointError } from '../contract/errors';
import { supportsStreams } from '../contract/run-stream';
import { RunStreamReader } from '../composition/run-stream-reader';
import type { StreamEventView } from './api-types';
import { SSE_END, SSE_KEEP_ALIVE, SSE_PREAMBLE, sseEvent, sseFailure, sseStartOffset } from '../http/sse-format';
import { onlyKeys } from './http-io';

/*
 * `GET /api/runs/:id/stream?from=N`: a run's live output as Server-Sent Events, for the page's output
 * panel (and any EventSource). Each event's `id:` is its offset and its `data:` the event exactly as
 * `waypoint.stream` yields it; a reconnecting EventSource sends `Last-Event-ID`, and the stream goes on
 * after it, so nothing is skipped or sent twice. When the run has ended and everything was sent, an
 * `end` event closes the stream (an EventSource would otherwise reconnect).
 */

/** A comment line every so often keeps proxies from closing an idle stream (a paused run's). */
const KEEP_ALIVE_MS = 15_000;

/** Streams that are open, so the server's close ends them. */
export type OpenStreams = Set<AbortController>;

/**
 * Answers one stream request: 404 for an unknown run and 501 for a store without streams (before any
 * event), then the events until the run ends, the client goes away or the server closes.
 *
 * @example
 * route('GET', '/api/runs/:id/stream', (req, res, [id], url) => serveRunStream(store, req, res, parseRunId(id), url, open));
 */
export async function serveRunStream(store: CheckpointStore, req: IncomingMessage, res: ServerResponse, runId: string, url: URL, open: OpenStreams): Promise<void> {
  onlyKeys('query', url.searchParams.keys(), ['from']);
  const last = req.headers['last-event-id'];
  const from = sseStartOffset(typeof last === 'string' ? last : undefined, url.searchParams.get('from'));
  if (!supportsStreams(store)) throw new StreamsUnsupportedError(runId, store.constructor.name);
  if (!(await store.getRun(runId))) throw new RunNotFoundError(runId);
  const stop = new AbortController();
  open.add(stop);
  const onClose = () => stop.abort();
  req.on('close', onClose);
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no', connection: 'keep-alive' });
  res.write(SSE_PREAMBLE);
  const keepAlive = setInterval(() => res.write(SSE_KEEP_ALIVE), KEEP_ALIVE_MS);
  try {
    for await (const event of new RunStreamReader(store, runId, { from, signal: stop.signal })) {
      // A slow client: wait for its socket to drain rather than buffer a long stream in memory.
      if (!res.write(sseEvent(event satisfies StreamEventView))) await drained(res, stop.signal);
    }
    if (!stop.signal.aborted) res.write(SSE_END);
  } catch (error) {
    const body = error instanceof WaypointError ? { code: error.code, message: error.message } : { code: 'INTERNAL', message: 'The stream failed; see the UI server log.' };
    res.write(sseFailure(body.code, body.message));
    if (!(error instanceof WaypointError)) throw error;
  } finally {
    clearInterval(keepAlive);
    req.off('close', onClose);
    open.delete(stop);
    res.end();
  }
}

/** Resolves when `res` drained, or at once when `signal` aborts (the client went away, the server closes). */
function drained(res: ServerResponse, signal: AbortSignal): Promise<void> {
  return once(res, 'drain', { signal }).then(
    () => undefined,
    () => undefined,
  );
}
