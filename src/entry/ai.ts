/**
 * `waypoint-durable/ai`: durable agents on the Vercel AI SDK (`durableModel`, `durableTools`) and a run's
 * live stream as the SDK's UI message stream (`runUIMessageStreamResponse` and friends, for `useChat`
 * routes: docs/chat.md). The browser half is `waypoint-durable/ai/client`.
 */
export * from '../integrations/ai/index';
export {
  runUIMessage,
  runUIMessageChunks,
  runUIMessageStream,
  runUIMessageStreamResponse,
  type IndexedChunk,
  type RunUIMessageStreamOptions,
  type RunUIMessageStreamResponseOptions,
} from '../http/chat/ui-message-stream';
export { STATUS_PART, type PartMapper } from '../http/chat/ui-message-chunks';
