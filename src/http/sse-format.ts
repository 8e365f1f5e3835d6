import { HttpError } from './http-error';

/*
 * The Server-Sent Events framing both faces use for a run's stream (the timeline page's
 * `GET /api/runs/:id/stream` and the HTTP handler's `GET /runs/:id/stream`): each event's `id:` is its
 * offset and its `data:` the event exactly as `waypoint.stream` yields it; a reconnecting EventSource
 * sends `Last-Event-ID`, and the stream goes on after it, so nothing is skipped or sent twice.
 */

/** Sent first: how long an EventSource waits before it reconnects. */
export const SSE_PREAMBLE = 'retry: 2000\n\n';
/** A comment line that keeps proxies from closing an idle stream (a paused or waiting run's). */
export const SSE_KEEP_ALIVE = ': keep-alive\n\n';
/** Closes a stream whose run ended and was sent whole (an EventSource would otherwise reconnect). */
export const SSE_END = 'event: end\ndata: {}\n\n';

/** One stream event as an SSE message. */
export function sseEvent(event: { offset: number }): string {
  return `id: ${event.offset}\ndata: ${JSON.stringify(event)}\n\n`;
}

/** A failure after the stream started: the typed code and message, as an `event: failure` message. */
export function sseFailure(code: string, message: string): string {
  return `event: failure\ndata: ${JSON.stringify({ error: { code, message } })}\n\n`;
}

/** `Last-Event-ID` (the offset after it) wins over `?from=` (default 0); 400 for anything but an offset. */
export function sseStartOffset(lastEventId: string | null | undefined, from: string | null): number {
  if (typeof lastEventId === 'string' && lastEventId !== '') return offsetOf(lastEventId, 'Last-Event-ID') + 1;
  return from === null ? 0 : offsetOf(from, 'from');
}

function offsetOf(text: string, what: string): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(value)) {
    throw new HttpError(400, 'BAD_QUERY', `${what} must be a stream offset (a non-negative integer), got '${text.slice(0, 40)}'.`);
  }
  return value;
}
