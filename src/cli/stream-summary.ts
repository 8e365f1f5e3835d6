import type { CheckpointStore } from '../contract/checkpoint-store';
import { MAX_STREAM_READ, supportsStreams } from '../contract/run-stream';

/** What `runs show` says about a run's live output stream. */
export interface StreamSummary {
  /** Events in the stream (its length). */
  events: number;
  parts: number;
  retractions: number;
  /** How many events the counts cover: all of them, or the first MAX_STREAM_READ of a longer stream. */
  counted: number;
}

/**
 * The size of run `runId`'s stream and its parts and retractions, counted over one read of at most
 * `MAX_STREAM_READ` events (a stream longer than that is counted in its first events only, and says so):
 * one length query and one read, whatever the stream holds. Null for a store without streams.
 *
 * @example
 * const summary = await streamSummary(store, 'q3-aapl'); // { events: 212, parts: 205, retractions: 1, counted: 212 }
 */
export async function streamSummary(store: CheckpointStore, runId: string): Promise<StreamSummary | null> {
  if (!supportsStreams(store)) return null;
  const events = await store.streamLength(runId);
  if (events === 0) return { events, parts: 0, retractions: 0, counted: 0 };
  const read = await store.readEvents(runId, 0, MAX_STREAM_READ);
  return {
    events,
    parts: read.filter((e) => e.kind === 'part').length,
    retractions: read.filter((e) => e.kind === 'retract').length,
    counted: read.length,
  };
}

/** The `output` line of `runs show`: `212 event(s): 205 part(s), 1 retraction(s) (runs tail q3-aapl)`. */
export function streamSummaryText(runId: string, summary: StreamSummary): string {
  if (summary.events === 0) return 'no live output';
  const partial = summary.counted < summary.events ? ` in the first ${summary.counted.toLocaleString('en-US')}` : '';
  return `${summary.events} event(s): ${summary.parts} part(s), ${summary.retractions} retraction(s)${partial} (runs tail ${runId})`;
}
