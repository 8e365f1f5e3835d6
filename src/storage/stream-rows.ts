import type { RunStatus, StoredStreamEvent, StreamEvent } from '../contract/checkpoint-store';

/*
 * The stored form of a run's stream events, shared by the SQL and Redis backends: one nullable column
 * (or hash field) per property of any kind, so one table (or stream entry shape) holds all three kinds.
 */

/** The kinds of `StreamEvent`, for the backends that CHECK the kind column. */
export const STREAM_EVENT_KINDS = ['part', 'retract', 'status'] as const;

/**
 * A stored event as the backends build it from their row or entry (one column or field per property,
 * null where the kind has none): `detail` only when stored.
 *
 * @example
 * storedEvent({ offset: 0, kind: 'status', step: null, attempt: null, data: null, status: 'running', detail: null, createdAt });
 */
export function storedEvent(row: StreamRow): StoredStreamEvent {
  const { offset, createdAt } = row;
  if (row.kind === 'part') return { offset, createdAt, kind: 'part', step: row.step ?? '', attempt: row.attempt ?? 0, data: row.data ?? '' };
  if (row.kind === 'retract') return { offset, createdAt, kind: 'retract', step: row.step ?? '', attempt: row.attempt ?? 0 };
  const event: StoredStreamEvent = { offset, createdAt, kind: 'status', status: (row.status ?? 'running') as RunStatus };
  if (row.detail !== null && row.detail !== undefined) event.detail = row.detail;
  return event;
}

/** A stream event flattened to one nullable value per property, as the SQL and Redis backends store it. */
export interface StreamRow {
  offset: number;
  kind: string;
  step: string | null;
  attempt: number | null;
  data: string | null;
  status: string | null;
  detail: string | null;
  createdAt: Date;
}

/**
 * `event` flattened for storage (`storedEvent` reads it back).
 *
 * @example
 * streamRow({ kind: 'retract', step: 'a/b', attempt: 2 }, 7, now); // { offset: 7, kind: 'retract', step: 'a/b', attempt: 2, data: null, ... }
 */
export function streamRow(event: StreamEvent, offset: number, createdAt: Date): StreamRow {
  const base = { offset, kind: event.kind, step: null, attempt: null, data: null, status: null, detail: null, createdAt };
  if (event.kind === 'part') return { ...base, step: event.step, attempt: event.attempt, data: event.data };
  if (event.kind === 'retract') return { ...base, step: event.step, attempt: event.attempt };
  return { ...base, status: event.status, detail: event.detail ?? null };
}
