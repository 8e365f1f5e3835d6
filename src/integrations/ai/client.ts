/**
 * The browser side of a durable chat (`waypoint-durable/ai/client`): a `useChat` transport whose streams
 * survive a cut connection. It loads nothing of Waypoint's server code, only the AI SDK.
 *
 * @example
 * import { useChat } from '@ai-sdk/react';
 * import { WaypointChatTransport } from 'waypoint-durable/ai/client';
 *
 * const chat = useChat({ id: chatId, messages: history, resume: true, transport: new WaypointChatTransport({ api: '/api/chat' }) });
 */
import { DefaultChatTransport, type HttpChatTransportInitOptions, type UIMessage, type UIMessageChunk } from 'ai';

/** Options of `WaypointChatTransport`: the AI SDK's HTTP transport options, and how hard to hold on. */
export interface WaypointChatTransportOptions<M extends UIMessage> extends HttpChatTransportInitOptions<M> {
  /** Tries to continue a cut stream before the chat shows the error (default 10, counted since the last chunk that arrived). */
  maxReconnects?: number;
  /** The wait before the first try, doubled each time up to 5 s (default 250 ms). */
  reconnectDelayMs?: number;
}

/** Chunks after which a UI message stream has ended by itself: anything else that ends it is a cut. */
const TERMINAL = new Set(['finish', 'abort', 'error']);

type SendOptions<M extends UIMessage> = Parameters<DefaultChatTransport<M>['sendMessages']>[0];
type ReconnectOptions<M extends UIMessage> = Parameters<DefaultChatTransport<M>['reconnectToStream']>[0];

/**
 * The AI SDK's `DefaultChatTransport` (same options, same requests) whose streams continue across a cut
 * connection: when the response breaks off before the message's last chunk, it asks the chat's
 * reconnect route (`GET {api}/{chatId}/stream`) again with `Last-Event-ID` set to the last chunk it
 * got, and goes on with what comes back, so `useChat` sees one uninterrupted stream: no gap, no chunk
 * twice, no error shown. The route answers with `runUIMessageStreamResponse` (waypoint-durable/ai),
 * whose chunk indexes make that exact. A reconnect without `Last-Event-ID` (a reloaded page's `resume`)
 * replays the message from its start, as `resumeStreamIsReplay` tells `useChat`.
 *
 * Stopping the chat (`stop()`) aborts the request and is never retried; it does not cancel the run,
 * which goes on on the server (a stop button calls the run's cancel route as well).
 */
export class WaypointChatTransport<M extends UIMessage = UIMessage> extends DefaultChatTransport<M> {
  private readonly maxReconnects: number;
  private readonly reconnectDelayMs: number;

  constructor(options: WaypointChatTransportOptions<M> = {}) {
    const { maxReconnects, reconnectDelayMs, ...http } = options;
    super({ ...http, resumeStreamIsReplay: true });
    this.maxReconnects = maxReconnects ?? 10;
    this.reconnectDelayMs = reconnectDelayMs ?? 250;
  }

  override async sendMessages(options: SendOptions<M>): Promise<ReadableStream<UIMessageChunk>> {
    return this.holding(await super.sendMessages(options), options);
  }

  override async reconnectToStream(options: ReconnectOptions<M>): Promise<ReadableStream<UIMessageChunk> | null> {
    const stream = await super.reconnectToStream(options);
    return stream === null ? null : this.holding(stream, options);
  }

  /** `first`, continued through the reconnect route whenever it breaks off before its end. */
  private holding(first: ReadableStream<UIMessageChunk>, options: ReconnectOptions<M>): ReadableStream<UIMessageChunk> {
    let reader = first.getReader();
    let received = 0;
    let tries = 0;
    const again = async (): Promise<boolean> => {
      if (options.abortSignal?.aborted || tries >= this.maxReconnects) return false;
      await pause(Math.min(this.reconnectDelayMs * 2 ** tries, 5_000), options.abortSignal);
      tries += 1;
      const headers = { ...toRecord(options.headers), ...(received > 0 ? { 'last-event-id': String(received - 1) } : {}) };
      try {
        const next = await super.reconnectToStream({ ...options, headers });
        if (next === null) return false;
        reader = next.getReader();
      } catch (error) {
        if (options.abortSignal?.aborted) throw error;
        // The server is not back yet: the next try waits longer.
      }
      return true;
    };
    let ended = false;
    return new ReadableStream<UIMessageChunk>({
      pull: async (controller) => {
        for (;;) {
          let next: Awaited<ReturnType<typeof reader.read>>;
          try {
            next = await reader.read();
          } catch (error) {
            if (options.abortSignal?.aborted || !(await again())) throw error;
            continue;
          }
          if (next.done) {
            if (!ended && (await again())) continue;
            controller.close();
            return;
          }
          received += 1;
          tries = 0;
          ended = TERMINAL.has(next.value.type);
          controller.enqueue(next.value);
          return;
        }
      },
      cancel: async (reason) => {
        await reader.cancel(reason);
      },
    });
  }
}

function toRecord(headers: ReconnectOptions<UIMessage>['headers']): Record<string, string> {
  if (headers === undefined) return {};
  if (typeof Headers !== 'undefined' && headers instanceof Headers) return Object.fromEntries(headers.entries());
  return { ...(headers as Record<string, string>) };
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
