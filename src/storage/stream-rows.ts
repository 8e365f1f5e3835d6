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

/*
 * Batches (migration V7, issue 37's bytes target): one row or stream entry per `appendEvents` call, not
 * per event. Its body is a JSON header line, then the parts' data strings concatenated as they are:
 * - the header is an array with one item per event: a number n is a part of the current step and
 *   attempt whose data is the next n characters (UTF-16 code units) after the header;
 *   `["p", step, attempt, n]` is a part that sets the current step and attempt; `["r", step, attempt]`
 *   a retraction; `["s", status]` or `["s", status, detail]` a status;
 * - a part's data is opaque (sealed text with encryption on), so it is never parsed nor escaped: a run
 *   of parts of one step costs its data and three or four characters each.
 */

/**
 * `events` as one batch body (`decodeStreamBatch` reads it back).
 *
 * @example
 * encodeStreamBatch([{ kind: 'part', step: 'a/b', attempt: 1, data: '"hi"' }]) // '[["p","a/b",1,4]]\n"hi"'
 */
export function encodeStreamBatch(events: readonly StreamEvent[]): string {
  const header: unknown[] = [];
  const data: string[] = [];
  let step: string | null = null;
  let attempt = 0;
  for (const event of events) {
    if (event.kind === 'part') {
      if (event.step === step && event.attempt === attempt) header.push(event.data.length);
      else header.push(['p', (step = event.step), (attempt = event.attempt), event.data.length]);
      data.push(event.data);
    } else if (event.kind === 'retract') header.push(['r', event.step, event.attempt]);
    else header.push(event.detail === undefined ? ['s', event.status] : ['s', event.status, event.detail]);
  }
  return `${JSON.stringify(header)}\n${data.join('')}`;
}

/**
 * The events of a batch body whose first event has offset `first`, those from offset `from` on (all
 * when `from <= first`), at most `limit` of them.
 *
 * @example
 * decodeStreamBatch(body, 40, 42, 100, createdAt) // the batch's events from offset 42
 */
export function decodeStreamBatch(body: string, first: number, from: number, limit: number, createdAt: Date): StoredStreamEvent[] {
  const split = body.indexOf('\n');
  const header = JSON.parse(split < 0 ? body : body.slice(0, split)) as unknown[];
  const out: StoredStreamEvent[] = [];
  let at = split + 1;
  let step = '';
  let attempt = 0;
  for (let i = 0; i < header.length && out.length < limit; i++) {
    const offset = first + i;
    const item = header[i];
    if (typeof item === 'number' || (item as unknown[])[0] === 'p') {
      if (typeof item !== 'number') [, step, attempt] = item as [string, string, number];
      const length = typeof item === 'number' ? item : (item as number[])[3];
      const data = body.slice(at, (at += length));
      if (offset >= from) out.push({ offset, createdAt, kind: 'part', step, attempt, data });
    } else if (offset >= from) {
      const [kind, a, b] = item as [string, string, number | string | undefined];
      if (kind === 'r') out.push({ offset, createdAt, kind: 'retract', step: a, attempt: b as number });
      else
        out.push(
          b === undefined ? { offset, createdAt, kind: 'status', status: a as RunStatus } : { offset, createdAt, kind: 'status', status: a as RunStatus, detail: b as string },
        );
    }
  }
  return out;
}
