import type { RunStreamStore, StoredStreamEvent } from '../../contract/run-stream';

/** Events read per step back from the end of a stream, looking for the last execution's start. */
const TAIL_WINDOW = 1_000;

/** A step attempt with parts in the stream and no retraction after them. */
export interface OpenAttempt {
  step: string;
  attempt: number;
}

/**
 * What a new execution of run `runId` must retract before its own first event: the attempts of the steps
 * without a row (not in `recorded`) whose parts the stream holds with no retraction after them, i.e. the
 * attempts of an execution that died (SIGKILL, a lost machine) before it could retract them. An execution
 * appends its own start (`running`) after the retractions it owed, in one append, so only the events after
 * the last `running` status can be open: the stream is read backwards from its end, a window at a time,
 * until one is found; when the stream ends with a status other than `running` (the previous execution ended
 * by itself, its own retractions before that status), with one read of that event. Also returns the length.
 *
 * @example
 * const { orphans } = await orphanedAttempts(store, 'q3-aapl', new Set(['Research/gather']));
 */
export async function orphanedAttempts(store: RunStreamStore, runId: string, recorded: ReadonlySet<string>): Promise<{ length: number; orphans: OpenAttempt[] }> {
  const length = await store.streamLength(runId);
  // The usual resume: the last execution ended by itself (paused, waiting, failed), after retracting its own.
  const [last] = length > 0 ? await store.readEvents(runId, length - 1, 1) : [];
  if (last === undefined || (last.kind === 'status' && last.status !== 'running')) return { length, orphans: [] };
  const windows: StoredStreamEvent[][] = [];
  for (let end = length; end > 0;) {
    const from = Math.max(0, end - TAIL_WINDOW);
    const events = await store.readEvents(runId, from, end - from);
    windows.unshift(events);
    if (events.some((event) => event.kind === 'status' && event.status === 'running')) break;
    end = from;
  }
  const tail = windows.flat();
  let start = 0;
  for (let i = tail.length - 1; i >= 0; i--) {
    const event = tail[i];
    if (event.kind === 'status' && event.status === 'running') {
      start = i + 1;
      break;
    }
  }
  const open = new Map<string, OpenAttempt>();
  for (const event of tail.slice(start)) {
    if (event.kind === 'status') continue;
    const key = JSON.stringify([event.step, event.attempt]);
    if (event.kind === 'part') open.set(key, { step: event.step, attempt: event.attempt });
    else open.delete(key);
  }
  return { length, orphans: [...open.values()].filter((attempt) => !recorded.has(attempt.step)) };
}
