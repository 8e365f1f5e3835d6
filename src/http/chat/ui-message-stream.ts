import { readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import type { Waypoint } from '../../composition/waypoint';
import { WaypointError } from '../../contract/errors';
import { UIMessageChunkConverter, type PartMapper } from './ui-message-chunks';

/*
 * A run's live stream as the AI SDK's UI message stream: the body `useChat` reads from a chat route
 * (docs/chat.md). The chunk at index i always is the same chunk (the conversion is a pure function of the
 * run's events), so each SSE message carries its index as `id:` and a request with `Last-Event-ID: k`
 * answers with chunk k + 1 onwards: `WaypointChatTransport` (waypoint-durable/ai/client) uses that to
 * continue a cut connection with no gap and nothing twice. A request without it replays the message from
 * its start, which `useChat`'s resume (`resumeStreamIsReplay`) expects.
 */

/** Options of `runUIMessageStream` and `runUIMessageStreamResponse`. */
export interface RunUIMessageStreamOptions {
  /** The assistant message's id (default: the run id). */
  messageId?: string;
  /** Metadata of the `start` chunk (default `{ runId }`). */
  messageMetadata?: unknown;
  /** Chunks for parts that are not model, tool or `data-*` parts (default: such parts are skipped). */
  mapPart?: PartMapper;
  /** Ends the stream (quietly) when it aborts: the client went away. The run goes on. */
  signal?: AbortSignal;
  /** Keep following the run until it ends (default true); false: what is stored now. */
  follow?: boolean;
}

/** Options of `runUIMessageStreamResponse`. */
export interface RunUIMessageStreamResponseOptions extends RunUIMessageStreamOptions {
  /** The chat route's request: its `Last-Event-ID` header says where to continue, its signal when to stop. */
  request?: Request;
  /** A comment line this often keeps proxies from closing a quiet stream (a run waiting for approval). Default 15 s. */
  heartbeatMs?: number;
  /** Extra response headers. */
  headers?: Record<string, string>;
}

/** The headers the AI SDK's transports expect of a UI message stream (as `createUIMessageStreamResponse` sends them). */
const UI_STREAM_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-store',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
};

/** A chunk with its index in the run's UI message stream. */
export interface IndexedChunk {
  index: number;
  chunk: UIMessageChunk;
}

/**
 * The run's UI message chunks with their indexes, from index `after + 1` (-1: from the start). Later
 * chunks are computed from the run's events from offset 0 each time: a chat answer is a few thousand
 * events at most, and only the chunks after `after` are sent.
 *
 * @example
 * for await (const { index, chunk } of runUIMessageChunks(waypoint, 'chat-7~3', 41)) send(index, chunk);
 */
export async function* runUIMessageChunks(waypoint: Waypoint, runId: string, after = -1, options: RunUIMessageStreamOptions = {}): AsyncGenerator<IndexedChunk> {
  const convert = new UIMessageChunkConverter({ messageId: options.messageId ?? runId, messageMetadata: options.messageMetadata ?? { runId }, mapPart: options.mapPart });
  let index = -1;
  for (const chunk of convert.begin()) if (++index > after) yield { index, chunk };
  for await (const event of waypoint.stream(runId, { from: 0, follow: options.follow ?? true, signal: options.signal })) {
    for (const chunk of convert.push(event)) if (++index > after) yield { index, chunk };
  }
  if (options.signal?.aborted) return;
  // A followed reading ends when the run is over; a run that ended without a terminal status event (an
  // older run) is asked how it ended.
  const ended = options.follow === false ? undefined : (await waypoint.get(runId))?.status;
  for (const chunk of convert.end(ended)) if (++index > after) yield { index, chunk };
}

/**
 * The run's UI message stream as a `ReadableStream` of chunks (for `createUIMessageStreamResponse`, a
 * WebSocket, or `readUIMessageStream`). It ends with the run (`finish`, `error` or `abort`).
 *
 * @example
 * return createUIMessageStreamResponse({ stream: runUIMessageStream(waypoint, runId, { signal: req.signal }) });
 */
export function runUIMessageStream(waypoint: Waypoint, runId: string, options: RunUIMessageStreamOptions = {}): ReadableStream<UIMessageChunk> {
  const chunks = runUIMessageChunks(waypoint, runId, -1, options);
  return new ReadableStream<UIMessageChunk>({
    async pull(controller) {
      const next = await chunks.next();
      if (next.done) controller.close();
      else controller.enqueue(next.value.chunk);
    },
    async cancel() {
      await chunks.return(undefined);
    },
  });
}

/**
 * The answer of a chat route (its POST, and its reconnect GET): the run's UI message stream as
 * Server-Sent Events, each `id:` the chunk's index. With the request's `Last-Event-ID: k` it continues
 * at chunk k + 1; without it, it replays the message from its start. The client going away stops the
 * reading, never the run (the stop button is `waypoint.cancel`).
 *
 * @example
 * // app/api/chat/[id]/stream/route.ts
 * export const GET = async (req: Request) => runUIMessageStreamResponse(waypoint, activeRun, { request: req });
 */
export async function runUIMessageStreamResponse(waypoint: Waypoint, runId: string, options: RunUIMessageStreamResponseOptions = {}): Promise<Response> {
  const header = options.request?.headers.get('last-event-id');
  const after = lastEventIndex(header);
  if (after === undefined) return refusal(400, 'BAD_LAST_EVENT_ID', `Last-Event-ID must be a chunk index (a non-negative integer), got '${String(header).slice(0, 40)}'.`);
  if ((await waypoint.get(runId)) === null) return refusal(404, 'RUN_NOT_FOUND', `No run '${runId}' is stored: nothing to stream.`);
  const stop = new AbortController();
  const gone = [options.signal, options.request?.signal].filter((s): s is AbortSignal => s !== undefined);
  const onGone = () => stop.abort();
  for (const signal of gone) signal.addEventListener('abort', onGone, { once: true });
  const chunks = runUIMessageChunks(waypoint, runId, after, { ...options, signal: stop.signal });
  const encoder = new TextEncoder();
  let keepAlive: NodeJS.Timeout | undefined;
  const finish = () => {
    clearInterval(keepAlive);
    for (const signal of gone) signal.removeEventListener('abort', onGone);
    stop.abort();
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      keepAlive = setInterval(() => {
        if (!stop.signal.aborted) controller.enqueue(encoder.encode(': keep-alive\n\n'));
      }, options.heartbeatMs ?? 15_000);
      keepAlive.unref?.();
    },
    async pull(controller) {
      try {
        const next = await chunks.next();
        if (!next.done) {
          controller.enqueue(encoder.encode(`id: ${next.value.index}\ndata: ${JSON.stringify(next.value.chunk)}\n\n`));
          return;
        }
        if (!stop.signal.aborted) controller.enqueue(encoder.encode('data: [DONE]\n\n'));
      } catch (error) {
        // After the headers went out a failure can only be told in the stream: an `error` chunk, no index
        // (a continuation must not skip past it).
        const errorText = error instanceof WaypointError ? `${error.code}: ${error.message}` : 'The run stream failed; see the server log.';
        controller.enqueue(encoder.encode(`data: ${JSON.stringify({ type: 'error', errorText })}\n\n`));
      }
      finish();
      controller.close();
    },
    async cancel() {
      finish();
      await chunks.return(undefined);
    },
  });
  return new Response(body, { status: 200, headers: { ...UI_STREAM_HEADERS, 'x-waypoint-run-id': runId, ...options.headers } });
}

/**
 * The assistant message a run's stream renders to, read to its current end (not following): what a
 * chat's history endpoint returns for a finished turn, equal to what the page showed live.
 *
 * @example
 * const answer = await runUIMessage(waypoint, 'chat-7~3'); // { id: 'chat-7~3', role: 'assistant', parts: [...] }
 */
export async function runUIMessage(waypoint: Waypoint, runId: string, options: Omit<RunUIMessageStreamOptions, 'follow' | 'signal'> = {}): Promise<UIMessage> {
  const stream = runUIMessageStream(waypoint, runId, { ...options, follow: false });
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({ stream, terminateOnError: false })) last = message;
  return last ?? { id: options.messageId ?? runId, role: 'assistant', parts: [] };
}

/** `Last-Event-ID` as a chunk index (-1 when absent; undefined when it is not one: refused rather than guessed). */
function lastEventIndex(header: string | null | undefined): number | undefined {
  if (header === null || header === undefined || header === '') return -1;
  return /^\d{1,15}$/.test(header) ? Number(header) : undefined;
}

/** A typed JSON refusal, in the HTTP handler's shape (`{ error: { code, message } }`). */
function refusal(status: number, code: string, message: string): Response {
  return new Response(JSON.stringify({ error: { code, message } }), { status, headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' } });
}
