import type { UIMessageChunk } from 'ai';
import type { RunStreamEvent } from '../../composition/run-stream-reader';

/**
 * The AI SDK's UI message stream (what `useChat` reads) made from a run's live stream: a pure function of
 * the run's events, so the same events always give the same chunks in the same order. That is what lets
 * a client that lost its connection after chunk k ask for chunk k + 1 onwards (the SSE ids are chunk
 * indexes) and get exactly the rest: no gap, nothing twice.
 *
 * A retraction (a dead attempt's parts withdrawn, docs/live-output.md) becomes a `reset-step`, which
 * empties the message (this stream never opens a UI step, so the whole message is the current step),
 * followed by every block still standing, re-sent compactly. The rendered message therefore ends up
 * with exactly the parts of the recorded attempts, whatever the page saw before.
 */

/** What the converter makes of a part it does not know: chunks to send, or nothing (the part is skipped). */
export type PartMapper = (part: unknown, event: { step: string; attempt: number; offset: number }) => UIMessageChunk[] | undefined;

/** Options of the conversion. */
export interface UIMessageChunkOptions {
  /** The assistant message's id (the `start` chunk's `messageId`). */
  messageId: string;
  /** Metadata sent with the `start` chunk (e.g. `{ runId }`). */
  messageMetadata?: unknown;
  /** Parts that are neither model stream parts, tool parts nor `data-*` chunks. Default: skipped. */
  mapPart?: PartMapper;
}

type TextKind = 'text' | 'reasoning';
interface TextBlock {
  kind: TextKind;
  origin: string;
  id: string;
  text: string;
  open: boolean;
}
interface ToolBlock {
  kind: 'tool';
  origin: string;
  toolCallId: string;
  toolName: string;
  inputText: string;
  input?: { value: unknown };
  result?: { output: unknown; providerExecuted?: boolean } | { errorText: string };
}
interface ChunkBlock {
  kind: 'chunk';
  origin: string;
  chunk: UIMessageChunk;
}
type Block = TextBlock | ToolBlock | ChunkBlock;
type Part = Record<string, unknown> & { type?: unknown };

/** The id of the status data part: one part, replaced as the run moves (`waiting`, `running`, ...). */
export const STATUS_PART = 'data-waypoint-status';
const STATUS_ORIGIN = '';
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/**
 * Turns a run's stream events into UI message chunks, one event at a time.
 *
 * @example
 * const convert = new UIMessageChunkConverter({ messageId: 'chat-1~2' });
 * const chunks = [...convert.begin(), ...convert.push(event)];
 */
export class UIMessageChunkConverter {
  private blocks: Block[] = [];
  /** Open text / reasoning blocks by origin and the provider's id (ids repeat across model calls). */
  private readonly texts = new Map<string, TextBlock>();
  private readonly tools = new Map<string, ToolBlock>();
  private ended = false;
  private last: { status: string; detail?: string } = { status: 'running' };

  constructor(private readonly options: UIMessageChunkOptions) {}

  /** True once a terminal chunk (`finish`, `error`, `abort`) was produced. */
  get finished(): boolean {
    return this.ended;
  }

  /** The last status event seen (`running` before any). */
  get lastStatus(): string {
    return this.last.status;
  }

  /** The message's first chunk. */
  begin(): UIMessageChunk[] {
    const start: UIMessageChunk = { type: 'start', messageId: this.options.messageId };
    if (this.options.messageMetadata !== undefined) start.messageMetadata = this.options.messageMetadata;
    return [start];
  }

  /** The chunks of one event of the run's stream. */
  push(event: RunStreamEvent): UIMessageChunk[] {
    if (this.ended) return [];
    if (event.kind === 'retract') return this.retract(`${event.step}#${event.attempt}`);
    if (event.kind === 'status') return this.status(event.status, event.detail);
    const origin = `${event.step}#${event.attempt}`;
    const part = event.data as Part;
    if (typeof part !== 'object' || part === null || typeof part.type !== 'string') return this.custom(event, origin);
    return this.modelPart(part, origin, event.offset) ?? this.toolPart(part, origin) ?? this.custom(event, origin);
  }

  private modelPart(part: Part, origin: string, offset: number): UIMessageChunk[] | undefined {
    switch (part.type) {
      case 'text-start':
      case 'reasoning-start':
        return this.openText(part.type === 'text-start' ? 'text' : 'reasoning', origin, String(part.id), offset);
      case 'text-delta':
      case 'reasoning-delta': {
        const kind = part.type === 'text-delta' ? 'text' : 'reasoning';
        const key = `${kind}:${origin}:${String(part.id)}`;
        const opened = this.texts.has(key) ? [] : this.openText(kind, origin, String(part.id), offset);
        const block = this.texts.get(key)!;
        const delta = text(part.delta);
        block.text += delta;
        return [...opened, { type: `${kind}-delta`, id: block.id, delta }];
      }
      case 'text-end':
      case 'reasoning-end': {
        const kind = part.type === 'text-end' ? 'text' : 'reasoning';
        const block = this.texts.get(`${kind}:${origin}:${String(part.id)}`);
        if (!block?.open) return [];
        block.open = false;
        return [{ type: `${kind}-end`, id: block.id }];
      }
      case 'source':
        return part.sourceType === 'url'
          ? this.keep(origin, { type: 'source-url', sourceId: String(part.id), url: String(part.url), title: part.title as string | undefined })
          : [];
      case 'stream-start':
      case 'response-metadata':
      case 'finish':
      case 'tool-input-end':
        return [];
      default:
        return undefined;
    }
  }

  private toolPart(part: Part, origin: string): UIMessageChunk[] | undefined {
    switch (part.type) {
      case 'tool-input-start': {
        const tool = this.tool(origin, String(part.id), String(part.toolName));
        return [{ type: 'tool-input-start', toolCallId: tool.toolCallId, toolName: tool.toolName }];
      }
      case 'tool-input-delta': {
        const tool = this.tools.get(String(part.id));
        if (!tool || tool.input) return [];
        tool.inputText += text(part.delta);
        return [{ type: 'tool-input-delta', toolCallId: tool.toolCallId, inputTextDelta: text(part.delta) }];
      }
      case 'tool-call':
      case 'tool-input': {
        const tool = this.tool(origin, String(part.toolCallId), String(part.toolName));
        if (tool.input) return [];
        tool.input = { value: part.type === 'tool-call' ? parseInput(part.input) : part.input };
        return [{ type: 'tool-input-available', toolCallId: tool.toolCallId, toolName: tool.toolName, input: tool.input.value }];
      }
      case 'tool-output':
      case 'tool-result':
      case 'tool-error':
        return this.toolResult(part, origin);
      default:
        return undefined;
    }
  }

  private toolResult(part: Part, origin: string): UIMessageChunk[] {
    const tool = this.tool(origin, String(part.toolCallId), String(part.toolName));
    const chunks: UIMessageChunk[] = tool.input ? [] : this.toolPart({ type: 'tool-input', toolCallId: tool.toolCallId, toolName: tool.toolName, input: undefined }, origin)!;
    if (part.type === 'tool-error') {
      tool.result = { errorText: String(part.error) };
      return [...chunks, { type: 'tool-output-error', toolCallId: tool.toolCallId, errorText: tool.result.errorText }];
    }
    const providerExecuted = part.type === 'tool-result' ? true : undefined;
    tool.result = { output: part.type === 'tool-result' ? part.result : part.output, providerExecuted };
    return [...chunks, outputChunk(tool.toolCallId, tool.result)];
  }

  /** A part the model and tool mappings do not know: a `data-*` chunk passes as it is, else `mapPart` decides. */
  private custom(event: RunStreamEvent & { kind: 'part' }, origin: string): UIMessageChunk[] {
    const part = event.data as Part | null;
    if (part && typeof part === 'object' && typeof part.type === 'string' && part.type.startsWith('data-') && 'data' in part) {
      return this.keep(origin, part as unknown as UIMessageChunk);
    }
    const mapped = this.options.mapPart?.(event.data, { step: event.step, attempt: event.attempt, offset: event.offset }) ?? [];
    return mapped.flatMap((chunk) => this.keep(origin, chunk));
  }

  private openText(kind: TextKind, origin: string, providerId: string, offset: number): UIMessageChunk[] {
    const block: TextBlock = { kind, origin, id: `${kind === 'text' ? 't' : 'r'}${offset}`, text: '', open: true };
    this.texts.set(`${kind}:${origin}:${providerId}`, block);
    this.blocks.push(block);
    return [{ type: `${kind}-start`, id: block.id }];
  }

  private tool(origin: string, toolCallId: string, toolName: string): ToolBlock {
    let tool = this.tools.get(toolCallId);
    if (!tool) {
      tool = { kind: 'tool', origin, toolCallId, toolName, inputText: '' };
      this.tools.set(toolCallId, tool);
      this.blocks.push(tool);
    }
    return tool;
  }

  /** Keeps a chunk that becomes a message part (a data part with an id replaces the earlier one). */
  private keep(origin: string, chunk: UIMessageChunk): UIMessageChunk[] {
    const id = (chunk as { id?: unknown }).id;
    const same = id === undefined ? -1 : this.blocks.findIndex((b) => b.kind === 'chunk' && b.chunk.type === chunk.type && (b.chunk as { id?: unknown }).id === id);
    if ((chunk as { transient?: unknown }).transient !== true) {
      if (same >= 0) this.blocks[same] = { kind: 'chunk', origin, chunk };
      else this.blocks.push({ kind: 'chunk', origin, chunk });
    }
    return [chunk];
  }

  /** Withdraws the blocks of one attempt: the message is emptied and what stands is sent again. */
  private retract(origin: string): UIMessageChunk[] {
    const kept = this.blocks.filter((b) => b.origin !== origin);
    if (kept.length === this.blocks.length) return [];
    this.blocks = kept;
    for (const [key, block] of this.texts) if (block.origin === origin) this.texts.delete(key);
    for (const [key, block] of this.tools) if (block.origin === origin) this.tools.delete(key);
    return [{ type: 'reset-step' }, ...kept.flatMap(replay)];
  }

  /**
   * A status event. Even `failed` is not the message's end here (a failed run can be resumed, and its
   * stream then goes on): the terminal chunk comes from `end`, when the reading ends.
   */
  private status(status: string, detail?: string): UIMessageChunk[] {
    this.last = { status, detail };
    if (status === 'running' || status === 'completed') {
      // Only worth a chunk when the page was told the run waited, paused or failed.
      const shown = this.blocks.some((b) => b.kind === 'chunk' && b.chunk.type === STATUS_PART);
      return shown ? this.statusPart(status, undefined) : [];
    }
    return this.statusPart(status, detail);
  }

  /**
   * The chunks that end the message when the reading ends: `finish` after `completed`, `error` after
   * `failed`, `abort` after `cancelled`, nothing while the run is not over (a read that did not follow).
   * `runStatus` stands in for a run that ended without a terminal status event (an older run).
   */
  end(runStatus?: string): UIMessageChunk[] {
    if (this.ended) return [];
    const status = TERMINAL.has(this.last.status) ? this.last.status : runStatus;
    if (status === undefined || !TERMINAL.has(status)) return [];
    this.ended = true;
    const close = this.closeOpen();
    if (status === 'completed') return [...close, { type: 'finish' }];
    if (status === 'failed') return [...close, { type: 'error', errorText: this.last.detail ?? 'The run failed.' }];
    return [...close, { type: 'abort', reason: this.last.detail ?? 'cancelled' }];
  }

  private statusPart(status: string, detail: string | undefined): UIMessageChunk[] {
    const data = status === 'waiting' ? { status, signal: detail } : detail === undefined ? { status } : { status, detail };
    return this.keep(STATUS_ORIGIN, { type: STATUS_PART, id: 'status', data });
  }

  private closeOpen(): UIMessageChunk[] {
    const chunks: UIMessageChunk[] = [];
    for (const block of this.blocks) {
      if ((block.kind === 'text' || block.kind === 'reasoning') && block.open) {
        block.open = false;
        chunks.push({ type: `${block.kind}-end`, id: block.id });
      }
    }
    return chunks;
  }
}

/** A block sent again as few chunks as it takes (after a reset). */
function replay(block: Block): UIMessageChunk[] {
  if (block.kind === 'chunk') return [block.chunk];
  if (block.kind !== 'tool') {
    const chunks: UIMessageChunk[] = [{ type: `${block.kind}-start`, id: block.id }];
    if (block.text !== '') chunks.push({ type: `${block.kind}-delta`, id: block.id, delta: block.text });
    if (!block.open) chunks.push({ type: `${block.kind}-end`, id: block.id });
    return chunks;
  }
  const { toolCallId, toolName } = block;
  const chunks: UIMessageChunk[] = block.input
    ? [{ type: 'tool-input-available', toolCallId, toolName, input: block.input.value }]
    : [{ type: 'tool-input-start', toolCallId, toolName }, ...(block.inputText ? [{ type: 'tool-input-delta' as const, toolCallId, inputTextDelta: block.inputText }] : [])];
  if (block.result) chunks.push(outputChunk(toolCallId, block.result));
  return chunks;
}

function outputChunk(toolCallId: string, result: NonNullable<ToolBlock['result']>): UIMessageChunk {
  if ('errorText' in result) return { type: 'tool-output-error', toolCallId, errorText: result.errorText };
  return result.providerExecuted
    ? { type: 'tool-output-available', toolCallId, output: result.output, providerExecuted: true }
    : { type: 'tool-output-available', toolCallId, output: result.output };
}

/** A part's text field (a delta): a string, else empty. */
function text(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

/** A model's tool call input: the JSON text the provider sent, parsed (kept as text when it is not JSON). */
function parseInput(input: unknown): unknown {
  if (typeof input !== 'string') return input;
  try {
    return JSON.parse(input) as unknown;
  } catch {
    return input;
  }
}
