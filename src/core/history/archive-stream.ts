import type { RunStreamStore, StoredStreamEvent, StreamEvent } from '../../contract/run-stream';

/** Events read per call when a prune archives a run's live output. */
const PAGE = 1_000;
/** Events appended per call when a restore writes it back (each call is one stored batch). */
const RESTORE_CHUNK = 5_000;

/** Every event of a run's stream, from offset 0, parts as the store holds them (sealed where it seals). */
export async function readWholeStream(store: RunStreamStore, runId: string): Promise<StoredStreamEvent[]> {
  const events: StoredStreamEvent[] = [];
  for (;;) {
    const page = await store.readEvents(runId, events.length, PAGE);
    events.push(...page);
    if (page.length < PAGE) return events;
  }
}

/**
 * Writes an archived stream back under its restored run, unfenced, at the same offsets: only the events
 * past the stream's current length, so a restore stopped half way and run again appends nothing twice.
 * Returns the events written.
 *
 * @example
 * await restoreStream(rawStore, 'q3-aapl', batch.stream ?? []); // offsets 0.. as archived
 */
export async function restoreStream(store: RunStreamStore, runId: string, archived: readonly StoredStreamEvent[]): Promise<number> {
  const start = await store.streamLength(runId);
  for (let from = start; from < archived.length; from += RESTORE_CHUNK) {
    await store.appendEvents(runId, archived.slice(from, from + RESTORE_CHUNK).map(asAppended));
  }
  return Math.max(0, archived.length - start);
}

/** A stored event as an append takes it: without its offset and time, which the store assigns again. */
function asAppended(event: StoredStreamEvent): StreamEvent {
  const { offset: _offset, createdAt: _createdAt, ...appended } = event;
  return appended;
}
