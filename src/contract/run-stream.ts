/*
 * A run's output stream as the store keeps it (issue 37): the event types, the optional capability of
 * `CheckpointStore` that appends, reads and waits for them, and the argument checks every backend runs
 * before it touches its database, so a bad event is refused the same way on each.
 */
import { InvalidStreamEventError, WaypointError } from './errors';
import type { Fence, RunStatus } from './records';

/**
 * One event of a run's stream, as a writer appends it (the store adds `offset` and `createdAt`):
 * - `part`: one piece of live output of attempt `attempt` of step `step` (its path); `data` is the
 *   runtime's serialized JSON, opaque to the store like every payload (sealed by an encrypting store);
 * - `retract`: every earlier part of that attempt of that step is withdrawn (it will not be recorded);
 * - `status`: the run moved to `status` (`detail`: e.g. the signal a waiting run waits for).
 *
 * @example
 * await store.appendEvents!('q3-aapl', [{ kind: 'part', step: 'Research/gather', attempt: 1, data: '{"text":"Hel"}' }], { epoch });
 */
export type StreamEvent =
  { kind: 'part'; step: string; attempt: number; data: string } | { kind: 'retract'; step: string; attempt: number } | { kind: 'status'; status: RunStatus; detail?: string };

/**
 * A stream event as stored and read back: its per-run `offset` (0, 1, 2, ... in append order, no gaps)
 * and the store's time of the append. A `status` event without a detail has no `detail` property.
 */
export type StoredStreamEvent = StreamEvent & { offset: number; createdAt: Date };

/** The most events `readEvents` returns per call, whatever `limit` asks (a bound on one read's memory). */
export const MAX_STREAM_READ = 10_000;

/**
 * The optional stream capability of a `CheckpointStore` (every backend of this package has it; a user's
 * own store may leave it out and still compile). Offsets are assigned by the store at append, per run,
 * contiguous from 0, in append order, without a race between concurrent appenders of one run.
 */
export interface RunStreamStore {
  /**
   * Appends `events` (at least one) to run `runId`'s stream, all or none, and returns the offset of the
   * first. With `fence`, only while it is the run's current lease epoch, checked atomically with the
   * append: otherwise nothing is written and `LeaseLostError` is thrown (an unknown run too, as
   * `appendStep`). Without a fence (a status event from another process, e.g. a cancel) it appends
   * unfenced; an unknown run is then `RunNotFoundError`. Bad events: `InvalidStreamEventError`.
   */
  appendEvents(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number>;
  /**
   * The events of run `runId` with `offset >= from`, ascending, at most `limit` (capped at
   * `MAX_STREAM_READ`). An unknown run, or `from` past the end, reads `[]`.
   */
  readEvents(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]>;
  /**
   * Resolves with true once run `runId`'s stream holds an event with `offset >= from` (at once if it
   * already does), appended by this store object or any other on the same database, or with false when
   * `signal` aborts first (give `AbortSignal.timeout(ms)` for a bounded wait). Never rejects for an
   * abort; an unknown run waits until one is appended or the signal aborts.
   */
  waitForEvents(runId: string, from: number, signal: AbortSignal): Promise<boolean>;
  /** How many events run `runId`'s stream holds (its next offset); 0 for an unknown run. */
  streamLength(runId: string): Promise<number>;
}

/**
 * Refuses a batch `appendEvents` cannot store, before anything is written: empty, or an event that is
 * not one of the three kinds with its fields of the right types.
 *
 * @example
 * checkStreamAppend('q3-aapl', events); // throws InvalidStreamEventError naming the first bad event
 */
export function checkStreamAppend(runId: string, events: readonly StreamEvent[]): void {
  if (!Array.isArray(events) || events.length === 0) {
    throw new InvalidStreamEventError(runId, -1, 'the batch is empty or not an array; append at least one event');
  }
  const batch: readonly StreamEvent[] = events; // Array.isArray narrows a readonly array to any[]
  batch.forEach((event, index) => {
    const problem = streamEventProblem(event);
    if (problem) throw new InvalidStreamEventError(runId, index, problem);
  });
}

/** What is wrong with `event` as a `StreamEvent`, or null when nothing is. */
function streamEventProblem(event: StreamEvent): string | null {
  if (typeof event !== 'object' || event === null) return 'it is not an object';
  switch (event.kind) {
    case 'part':
      if (typeof event.data !== 'string') return "a 'part' event's data must be a string (the serialized JSON)";
      return stepProblem(event);
    case 'retract':
      return stepProblem(event);
    case 'status':
      if (!STATUSES.has(event.status)) return `status ${JSON.stringify(event.status)} is not a run status`;
      if (event.detail !== undefined && typeof event.detail !== 'string') return "a 'status' event's detail must be a string when given";
      return null;
    default:
      return `kind ${JSON.stringify((event as { kind?: unknown }).kind)} is not 'part', 'retract' or 'status'`;
  }
}

const STATUSES: ReadonlySet<unknown> = new Set<RunStatus>(['running', 'paused', 'waiting', 'completed', 'failed', 'cancelled']);

function stepProblem(event: { step: unknown; attempt: unknown }): string | null {
  if (typeof event.step !== 'string' || event.step === '') return 'its step must be a non-empty string (the step path)';
  if (!Number.isInteger(event.attempt) || (event.attempt as number) < 1 || (event.attempt as number) > 2_147_483_647) return 'its attempt must be an integer from 1';
  return null;
}

/**
 * Refuses a `readEvents` or `waitForEvents` position that is not a non-negative integer, and a
 * `readEvents` limit that is not a positive integer. Returns the limit capped at `MAX_STREAM_READ`.
 *
 * @example
 * const limit = checkStreamRead('q3-aapl', from, limit);
 */
export function checkStreamRead(runId: string, from: number, limit = 1): number {
  if (!Number.isSafeInteger(from) || from < 0) {
    throw new WaypointError('INVALID_ARGUMENT', `Stream offset of run '${runId}' must be a non-negative integer, got ${JSON.stringify(from)}. Pass 0 to read from the start.`, {
      runId,
    });
  }
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new WaypointError('INVALID_ARGUMENT', `Stream read limit of run '${runId}' must be a positive integer, got ${JSON.stringify(limit)}. Pass e.g. 1000.`, { runId });
  }
  return Math.min(limit, MAX_STREAM_READ);
}

/**
 * True when `store` keeps run output streams (all four `RunStreamStore` methods).
 *
 * @example
 * if (supportsStreams(store)) for (const event of await store.readEvents(runId, 0, 100)) console.log(event.offset, event.kind);
 */
export function supportsStreams<S extends Partial<RunStreamStore>>(store: S): store is S & RunStreamStore {
  return (
    typeof store.appendEvents === 'function' && typeof store.readEvents === 'function' && typeof store.waitForEvents === 'function' && typeof store.streamLength === 'function'
  );
}
