import type { RunStreamEvent } from '../composition/run-stream-reader';

/*
 * How `runs tail` shows a run's live output in a terminal: text deltas joined inline (a string part, or
 * an AI-SDK-like `{ type: 'text-delta' | 'text', text }`), every other part as one JSON line, a
 * retraction and a status change as lines of their own. Pure: the command feeds it events and writes
 * what it returns, so the rendering is unit-tested as strings.
 */

/**
 * The text a part contributes inline, or null when it is not text: a string, or an object of type
 * `text-delta` / `text` (AI SDK stream parts, whose delta is `text`, `delta` or `textDelta` by version).
 *
 * @example
 * textOf({ type: 'text-delta', text: 'Hel' }) // 'Hel'
 */
export function textOf(data: unknown): string | null {
  if (typeof data === 'string') return data;
  if (typeof data !== 'object' || data === null) return null;
  const part = data as { type?: unknown; text?: unknown; delta?: unknown; textDelta?: unknown };
  if (part.type !== 'text-delta' && part.type !== 'text') return null;
  for (const value of [part.text, part.delta, part.textDelta]) if (typeof value === 'string') return value;
  return null;
}

/** What a status event reads as: `● waiting for signal 'approval'`. */
export function statusText(status: string, detail?: string): string {
  if (status === 'waiting') return `● waiting${detail ? ` for signal '${detail}'` : ''}`;
  return `● ${status}${detail ? ` (${detail})` : ''}`;
}

/**
 * The terminal view of one run's stream, event by event. Keeps whether a line of text is open (so a
 * line event first ends it) and which step's text is showing (so text from another step or attempt
 * starts under a header of its own).
 *
 * @example
 * const view = new StreamTextView(); for await (const e of waypoint.stream(id)) process.stdout.write(view.render(e));
 * process.stdout.write(view.end());
 */
export class StreamTextView {
  private inline = false;
  private speaker: string | null = null;

  render(event: RunStreamEvent): string {
    if (event.kind === 'part') {
      const text = textOf(event.data);
      const who = `${event.step}#${event.attempt}`;
      if (text !== null) {
        const header = who === this.speaker ? '' : `${this.breakLine()}── ${event.step} (attempt ${event.attempt}) ──\n`;
        this.speaker = who;
        this.inline = text.length > 0 && !text.endsWith('\n');
        return header + text;
      }
      this.speaker = null;
      return `${this.breakLine()}${event.step} ${JSON.stringify(event.data)}\n`;
    }
    this.speaker = null;
    if (event.kind === 'retract') return `${this.breakLine()}⟲ step ${event.step} attempt ${event.attempt} withdrawn (its output above will not be recorded)\n`;
    return `${this.breakLine()}${statusText(event.status, event.detail)}\n`;
  }

  /** Ends an open line of text (at the end of the stream). */
  end(): string {
    return this.breakLine();
  }

  private breakLine(): string {
    if (!this.inline) return '';
    this.inline = false;
    return '\n';
  }
}
