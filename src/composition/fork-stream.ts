/*
 * A fork's live output (issue 37): `waypoint.fork` copies into the new run the parts of the source's
 * stream that belong to the steps the fork copied, each of the attempt that step's row recorded, once
 * the source's retractions are applied; then a `paused` status saying where the fork came from. The
 * fork's offsets start at 0. Nothing of a step after the fork point, of a dead attempt, or of the
 * source's status history is copied: the fork's stream reads as if it had run those steps itself.
 */
import type { CheckpointStore, StoredStreamEvent, StreamEvent } from '../contract/checkpoint-store';
import { MAX_STREAM_READ, supportsStreams, type RunStreamStore } from '../contract/run-stream';
import type { Logger } from '../contract/logger';
import { rowPath, SYSTEM_AGENT } from '../core/history/row-integrity';
import { toRunStreamEvent, visibleParts } from './run-stream-reader';

/** Parts appended per batch while copying (one append is all or none; a bounded batch bounds its size). */
const COPY_BATCH = 500;
/** How long the copy holds the fork's lease, should this process die while copying. */
const COPY_LEASE_MS = 60_000;

/**
 * Copies the stream of `sourceRunId` into fork `newRunId` (see the module comment), under the fork's
 * lease so nothing else appends meanwhile. Returns how many parts were copied. A store without streams,
 * or a fork already taken by a worker (resumed at once), copies nothing; the latter is logged.
 *
 * @example
 * await copyForkStream(store, logger, workerId, 'q3-aapl', 'q3-aapl-retry', 4); // 212
 */
export async function copyForkStream(store: CheckpointStore, logger: Logger, workerId: string, sourceRunId: string, newRunId: string, atSequence: number): Promise<number> {
  if (!supportsStreams(store)) return 0;
  const recorded = new Set((await store.listSteps(newRunId)).filter((s) => s.agentId !== SYSTEM_AGENT).map((s) => `${rowPath(s)}#${s.attempt}`));
  const stored = recorded.size === 0 ? [] : await readAll(store, sourceRunId);
  const parts = visibleParts(stored.map((e) => toRunStreamEvent(sourceRunId, e))).filter((p) => recorded.has(`${p.step}#${p.attempt}`));
  const grant = await store.acquireLease(newRunId, workerId, COPY_LEASE_MS);
  if (!grant) {
    logger.warn('fork stream not copied: the fork was taken by a worker first', { runId: newRunId, forkedFrom: sourceRunId });
    return 0;
  }
  try {
    // The stored JSON as it was emitted (offsets are contiguous from 0, so an offset is an index).
    const events: StreamEvent[] = parts.map((p) => ({ kind: 'part', step: p.step, attempt: p.attempt, data: (stored[p.offset] as StoredStreamEvent & { data: string }).data }));
    events.push({ kind: 'status', status: 'paused', detail: `forked from '${sourceRunId}' at sequence ${atSequence}` });
    for (let i = 0; i < events.length; i += COPY_BATCH) await store.appendEvents(newRunId, events.slice(i, i + COPY_BATCH), { epoch: grant.epoch });
  } finally {
    await store.releaseLease(newRunId, workerId, grant.epoch);
  }
  return parts.length;
}

async function readAll(store: RunStreamStore, runId: string): Promise<StoredStreamEvent[]> {
  const events: StoredStreamEvent[] = [];
  for (;;) {
    const page = await store.readEvents(runId, events.length, MAX_STREAM_READ);
    events.push(...page);
    if (page.length < MAX_STREAM_READ) return events;
  }
}
