/*
 * The reading side of a run's live output (issue 37): `waypoint.stream(runId)` pages through the store's
 * `readEvents`, blocks on `waitForEvents` when it has caught up, and ends (when following) once the run
 * is over and everything before its end was delivered. docs/live-output-reading.md is the user's page.
 */
import type { CheckpointStore, RunRecord } from '../contract/checkpoint-store';
import type { RunStatus } from '../contract/records';
import { MAX_STREAM_READ, supportsStreams, type RunStreamStore, type StoredStreamEvent } from '../contract/run-stream';
import { RunNotFoundError, StreamsUnsupportedError, WaypointError } from '../contract/errors';

/** A piece of live output a step emitted (`ctx.emit(data)`) in attempt `attempt` of step `step` (its path). */
export interface RunStreamPart {
  offset: number;
  kind: 'part';
  step: string;
  attempt: number;
  /** The emitted JSON value, parsed. */
  data: unknown;
}

/** Every part of attempt `attempt` of step `step` before this event is withdrawn: that attempt will not be recorded. */
export interface RunStreamRetract {
  offset: number;
  kind: 'retract';
  step: string;
  attempt: number;
}

/** The run moved to `status` (`detail`: the signal a waiting run waits for). */
export interface RunStreamStatus {
  offset: number;
  kind: 'status';
  status: RunStatus;
  detail?: string;
}

/**
 * One event of a run's live stream as `waypoint.stream` yields it. It is plain JSON (no `Date`), so the
 * same object goes over SSE or a socket unchanged; `offset` is the per-run position to resume from.
 */
export type RunStreamEvent = RunStreamPart | RunStreamRetract | RunStreamStatus;

/** Options of `waypoint.stream`. */
export interface StreamOptions {
  /** The first offset to deliver (default 0): after a disconnect, pass the last offset seen + 1. */
  from?: number;
  /**
   * Keep following (default true) until the run is completed, failed or cancelled and every event
   * before its end was delivered; a paused or waiting run keeps the reader open. False: read what is
   * stored now and end.
   */
  follow?: boolean;
  /** Ends the iteration (quietly, without an error) when it aborts. */
  signal?: AbortSignal;
  /**
   * How long a caught-up reader waits for new events before it looks at the run record again
   * (default 1000 ms). A run that ended without writing a terminal status event (an older run, a
   * process killed before its last write) ends the reader after two such looks, or at once when it
   * ended more than 5 s (and two looks) before.
   */
  idleCheckMs?: number;
}

const TERMINAL: ReadonlySet<RunStatus> = new Set<RunStatus>(['completed', 'failed', 'cancelled']);

/**
 * A running read of one run's stream: an `AsyncIterableIterator` whose `return()` (a `break` out of
 * `for await`, or an explicit call while a `next()` is pending) aborts the store wait at once, so no
 * waiter, listener or timer outlives it.
 */
export class RunStreamReader implements AsyncIterableIterator<RunStreamEvent> {
  private readonly stop = new AbortController();
  private readonly events: AsyncGenerator<RunStreamEvent, void, undefined>;
  private readonly unlink: () => void;

  constructor(store: CheckpointStore, runId: string, options: StreamOptions = {}) {
    const outer = options.signal;
    const abort = () => this.stop.abort();
    outer?.addEventListener('abort', abort, { once: true });
    this.unlink = () => outer?.removeEventListener('abort', abort);
    if (outer?.aborted) this.stop.abort();
    this.events = readStream(store, runId, options, this.stop.signal);
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  async next(): Promise<IteratorResult<RunStreamEvent, undefined>> {
    try {
      const result = await this.events.next();
      if (!result.done) return result;
      this.unlink();
      return { done: true, value: undefined };
    } catch (error) {
      this.unlink();
      throw error;
    }
  }

  /** Stops the read: a pending `next()` resolves done, the store wait is released. */
  async return(): Promise<IteratorResult<RunStreamEvent, undefined>> {
    this.stop.abort();
    this.unlink();
    await this.events.return(undefined);
    return { done: true, value: undefined };
  }
}

async function* readStream(store: CheckpointStore, runId: string, options: StreamOptions, stop: AbortSignal): AsyncGenerator<RunStreamEvent, void, undefined> {
  const streams = streamStoreOf(store, runId);
  let offset = startOffset(runId, options.from);
  const follow = options.follow ?? true;
  const idleMs = idleCheckOf(runId, options.idleCheckMs);
  if (!(await store.getRun(runId))) throw new RunNotFoundError(runId);
  let lastStatus: RunStatus | null = null;
  let idleTerminalLooks = 0;
  let lookedOnce = false;
  while (!stop.aborted) {
    const page = await streams.readEvents(runId, offset, MAX_STREAM_READ);
    for (const stored of page) {
      if (stored.offset !== offset) throw gapError(runId, offset, stored.offset);
      const event = toRunStreamEvent(runId, stored);
      if (event.kind === 'status') lastStatus = event.status;
      offset += 1;
      yield event;
      if (stop.aborted) return;
    }
    if (page.length === MAX_STREAM_READ) continue;
    if (!follow) return;
    if (page.length > 0) idleTerminalLooks = 0;
    // Caught up: the run record says whether it is over. The terminal status event of the ending is
    // read first (it is the last event of an execution), so a run whose last status event matches its
    // terminal record ends here; one without such an event (an older run) after two idle looks.
    if (lastStatus !== null && TERMINAL.has(lastStatus) && (await store.getRun(runId))?.status === lastStatus) {
      if ((await streams.streamLength(runId)) <= offset) return;
      continue;
    }
    if (!lookedOnce) {
      // A run that ended long before this read (an older run without status events) ends it at once.
      lookedOnce = true;
      if (endedLongAgo(await store.getRun(runId), idleMs) && (await streams.streamLength(runId)) <= offset) return;
    }
    if (await waitIdle(streams, runId, offset, idleMs, stop)) continue;
    const run = await store.getRun(runId);
    if (!run) return; // deleted while followed: nothing more can come
    idleTerminalLooks = TERMINAL.has(run.status) ? idleTerminalLooks + 1 : 0;
    if (idleTerminalLooks >= 2 && (await streams.streamLength(runId)) <= offset) return;
  }
}

/**
 * A terminal run record last updated long enough ago that its ending's status event, which an executor
 * appends within moments of the record, would be there by now: at least 5 s, or two idle checks.
 */
function endedLongAgo(run: RunRecord | null, idleMs: number): boolean {
  return run !== null && TERMINAL.has(run.status) && Date.now() - run.updatedAt.getTime() > Math.max(5_000, 2 * idleMs);
}

/** Waits up to `ms` for an event at `offset`; true when one arrived. Every timer and listener is removed on return. */
async function waitIdle(streams: RunStreamStore, runId: string, offset: number, ms: number, stop: AbortSignal): Promise<boolean> {
  if (stop.aborted) return false;
  const bounded = new AbortController();
  const timer = setTimeout(() => bounded.abort(), ms);
  const abort = () => bounded.abort();
  stop.addEventListener('abort', abort, { once: true });
  try {
    return await streams.waitForEvents(runId, offset, bounded.signal);
  } finally {
    clearTimeout(timer);
    stop.removeEventListener('abort', abort);
  }
}

function streamStoreOf(store: CheckpointStore, runId: string): RunStreamStore {
  if (!supportsStreams(store)) throw new StreamsUnsupportedError(runId, store.constructor.name);
  return store;
}

function startOffset(runId: string, from: number | undefined): number {
  if (from === undefined) return 0;
  if (!Number.isSafeInteger(from) || from < 0) {
    throw new WaypointError(
      'INVALID_ARGUMENT',
      `Stream offset 'from' for run '${runId}' must be a non-negative integer, got ${JSON.stringify(from)}. Pass 0 to read from the start.`,
      {
        runId,
      },
    );
  }
  return from;
}

function idleCheckOf(runId: string, ms: number | undefined): number {
  if (ms === undefined) return 1000;
  if (!Number.isSafeInteger(ms) || ms < 1 || ms > 3_600_000) {
    throw new WaypointError('INVALID_ARGUMENT', `Stream option idleCheckMs for run '${runId}' must be an integer from 1 to 3600000 ms, got ${JSON.stringify(ms)}.`, { runId });
  }
  return ms;
}

function gapError(runId: string, expected: number, got: number): WaypointError {
  return new WaypointError(
    'STREAM_GAP',
    `The stream of run '${runId}' has no event at offset ${expected} (the store returned ${got} next). Its events were dropped or the store is inconsistent; read it again from ${got} to skip the gap.`,
    {
      runId,
    },
  );
}

/**
 * The stored event as a reader sees it: a part's data parsed back into the emitted JSON value.
 *
 * @example
 * toRunStreamEvent('q3-aapl', stored) // { offset: 4, kind: 'part', step: 'Writer/draft', attempt: 1, data: { text: 'Hel' } }
 */
export function toRunStreamEvent(runId: string, stored: StoredStreamEvent): RunStreamEvent {
  switch (stored.kind) {
    case 'part':
      return { offset: stored.offset, kind: 'part', step: stored.step, attempt: stored.attempt, data: parsePart(runId, stored) };
    case 'retract':
      return { offset: stored.offset, kind: 'retract', step: stored.step, attempt: stored.attempt };
    default:
      return stored.detail === undefined
        ? { offset: stored.offset, kind: 'status', status: stored.status }
        : { offset: stored.offset, kind: 'status', status: stored.status, detail: stored.detail };
  }
}

function parsePart(runId: string, stored: { offset: number; step: string; data: string }): unknown {
  try {
    return JSON.parse(stored.data) as unknown;
  } catch (error) {
    throw new WaypointError(
      'CHECKPOINT_CORRUPTED',
      `Part at offset ${stored.offset} of run '${runId}' (step '${stored.step}') is not JSON: ${(error as Error).message}. The stored event was altered or written by another program; read on from offset ${stored.offset + 1}.`,
      { runId, step: stored.step },
    );
  }
}

/**
 * The parts a consumer should show: every part not withdrawn by a later `retract` of its step and
 * attempt, in offset order. Applied to a completed run's whole stream, these are exactly the parts of
 * the attempts the run recorded, each once.
 *
 * @example
 * const events = []; for await (const e of waypoint.stream('q3-aapl')) events.push(e);
 * const text = visibleParts(events).map((p) => (typeof p.data === 'string' ? p.data : '')).join('');
 */
export function visibleParts(events: Iterable<RunStreamEvent>): RunStreamPart[] {
  const parts: RunStreamPart[] = [];
  for (const event of events) {
    if (event.kind === 'part') parts.push(event);
    else if (event.kind === 'retract') {
      const kept = parts.filter((part) => part.step !== event.step || part.attempt !== event.attempt || part.offset > event.offset);
      parts.splice(0, parts.length, ...kept);
    }
  }
  return parts.sort((a, b) => a.offset - b.offset);
}
