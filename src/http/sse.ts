import type { Waypoint } from '../composition/waypoint';
import { WaypointError } from '../contract/errors';
import { COMMON_HEADERS } from './request-io';
import { SSE_END, SSE_KEEP_ALIVE, SSE_PREAMBLE, sseEvent, sseFailure } from './sse-format';

/**
 * `GET /runs/:id/stream`: the run's stream from offset `from` as Server-Sent Events, until the run ends.
 * The body is pulled: the next event is read only when the client's connection took the last one, so a
 * slow client holds one event in memory, not the run's stream. The client going away (the request's
 * signal, or the body cancelled) stops this reader only: the run goes on.
 *
 * @example
 * return streamResponse(waypoint, 'chat-42', 0, 15_000, request.signal);
 */
export function streamResponse(waypoint: Waypoint, runId: string, from: number, heartbeatMs: number, clientGone: AbortSignal): Response {
  const stop = new AbortController();
  const onGone = () => stop.abort();
  clientGone.addEventListener('abort', onGone, { once: true });
  const events = waypoint.stream(runId, { from, signal: stop.signal })[Symbol.asyncIterator]();
  const encoder = new TextEncoder();
  let keepAlive: NodeJS.Timeout | undefined;
  const finish = () => {
    clearInterval(keepAlive);
    clientGone.removeEventListener('abort', onGone);
    stop.abort();
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(SSE_PREAMBLE));
      keepAlive = setInterval(() => {
        // A keep-alive into a closed stream throws; the stream's end clears this timer anyway.
        if (!stop.signal.aborted) controller.enqueue(encoder.encode(SSE_KEEP_ALIVE));
      }, heartbeatMs);
      keepAlive.unref?.();
    },
    async pull(controller) {
      try {
        const next = await events.next();
        if (!next.done) {
          controller.enqueue(encoder.encode(sseEvent(next.value)));
          return;
        }
        if (!stop.signal.aborted) controller.enqueue(encoder.encode(SSE_END));
      } catch (error) {
        const typed = error instanceof WaypointError;
        controller.enqueue(encoder.encode(sseFailure(typed ? error.code : 'INTERNAL', typed ? error.message : 'The stream failed; see the server log.')));
      }
      finish();
      controller.close();
    },
    cancel() {
      finish();
    },
  });
  return new Response(body, {
    status: 200,
    headers: { ...COMMON_HEADERS, 'content-type': 'text/event-stream; charset=utf-8', 'x-accel-buffering': 'no' },
  });
}
