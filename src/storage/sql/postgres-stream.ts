import { createHash } from 'node:crypto';
import type { Client, Pool, PoolConfig } from 'pg';
import { LeaseLostError, RunNotFoundError } from '../../contract/errors';
import { type Fence, type StoredStreamEvent, type StreamEvent, checkStreamAppend, checkStreamRead } from '../../contract/checkpoint-store';
import { pg } from '../drivers';
import { decodeStreamBatch, encodeStreamBatch, storedEvent } from '../stream-rows';
import { StreamWaiters } from '../stream-waiters';
import { type Row, toDate } from './rows';
import type { Tables } from './sql';
import { pgStreamChannel, pgStreamStatements } from './sql-stream';

/**
 * How long a PostgreSQL waiter sleeps without a notification before it reads the stream length again:
 * a notification lost with a dropped listening connection costs at most this, never a hang.
 */
export const PG_STREAM_RECHECK_MS = 1_000;

/**
 * The run-stream methods on PostgreSQL. An append is one statement (sql-stream.ts) that moves the run
 * row's counter under its fence, inserts the events and NOTIFYs the store's channel with the run id,
 * in one transaction, so a notification is only ever sent for committed events.
 *
 * Waiting: ONE listening connection per store (a `pg.Client` of its own, outside the pool, since a
 * LISTEN belongs to its session), opened by the first waiter and shared by all of them; each
 * notification wakes the waiters of its run, which read the length again. A waiter also re-reads every
 * `PG_STREAM_RECHECK_MS`, and when the connection drops every waiter is woken and the next wait opens
 * a new one; so a lost notification costs a poll interval.
 */
export class PostgresStreams {
  private readonly sql: ReturnType<typeof pgStreamStatements>;
  private readonly channel: string;
  private readonly names = new Map<string, string>();
  private readonly waiters = new StreamWaiters(PG_STREAM_RECHECK_MS);
  private listener: Promise<Client> | null = null;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    tables: Tables,
  ) {
    this.sql = pgStreamStatements(tables);
    this.channel = pgStreamChannel(tables);
  }

  async appendEvents(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number> {
    checkStreamAppend(runId, events);
    const values = [runId, fence ? fence.epoch : null, this.channel, events.length, encodeStreamBatch(events)];
    const res = await this.query(this.sql.append, values);
    const head = res.rows[0];
    if (!head) {
      if (fence) throw new LeaseLostError(runId, fence.epoch);
      throw new RunNotFoundError(runId);
    }
    return Number(head.first);
  }

  async readEvents(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
    const max = checkStreamRead(runId, from, limit);
    const start = Math.min(from, 2_147_483_647);
    const { rows } = await this.query(this.sql.read, [runId, start, Math.min(max, 2_147_483_647 - start)]);
    return streamRowsEvents(rows, from, max, toDate);
  }

  /** Deletes the run's events and resets its counter: one statement. */
  async dropStream(runId: string): Promise<number> {
    const { rows } = await this.query(this.sql.drop, [runId]);
    return Number(rows[0].dropped);
  }

  async streamLength(runId: string): Promise<number> {
    const { rows } = await this.query(this.sql.length, [runId]);
    return rows[0] ? Number(rows[0].stream_length) : 0;
  }

  async waitForEvents(runId: string, from: number, signal: AbortSignal): Promise<boolean> {
    checkStreamRead(runId, from);
    if (signal.aborted) return false;
    // Listening before the first read: a notification for an append after that read is not missed.
    await this.listen().catch(() => undefined); // unreachable: the recheck polls, and the read below reports the failure
    return this.waiters.wait(runId, from, signal, () => this.streamLength(runId));
  }

  /** How many waiters the shared listening connection serves (tests). */
  get waiterCount(): number {
    return this.waiters.size;
  }

  /** Ends the listening connection; waiters still registered fall back to polling until they end. */
  async close(): Promise<void> {
    this.closed = true;
    const listener = this.listener;
    this.listener = null;
    if (listener) await listener.then((client) => client.end()).catch(() => undefined);
  }

  private listen(): Promise<Client> {
    if (this.closed) return Promise.reject(new Error('the store is closed')); // plain Error: swallowed by waitForEvents, which polls instead
    this.listener ??= this.connect().catch((error: unknown) => {
      this.listener = null;
      throw error;
    });
    return this.listener;
  }

  private async connect(): Promise<Client> {
    const options = (this.pool as unknown as { options: PoolConfig }).options;
    const client = new (pg().Client)({ ...options, application_name: 'waypoint-stream-listener' });
    const lost = () => {
      if (this.listener && !this.closed) this.listener = null;
      this.waiters.notifyAll(); // what it would have delivered is read again by every waiter
    };
    client.on('notification', (message) => {
      if (message.channel === this.channel && message.payload) this.waiters.notify(message.payload);
    });
    client.on('error', lost);
    client.on('end', lost);
    await client.connect();
    try {
      await client.query(this.sql.listen(this.channel));
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    return client;
  }

  private query(text: string, values: unknown[]) {
    let name = this.names.get(text);
    if (!name) {
      name = `waypoint_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      this.names.set(text, name);
    }
    return this.pool.query<Row>({ name, text, values });
  }
}

/**
 * The events of the rows a stream read selected (V6 event rows and V7 batches, by first offset), from
 * offset `from` on, at most `limit`; `date` reads the dialect's created_at.
 *
 * @example
 * streamRowsEvents(rows, 42, 1000, toDate)
 */
export function streamRowsEvents(rows: Row[], from: number, limit: number, date: (value: unknown) => Date): StoredStreamEvent[] {
  const out: StoredStreamEvent[] = [];
  for (const row of rows) {
    if (out.length >= limit) break;
    if (row.body === null || row.body === undefined) {
      if (Number(row.offset) >= from) out.push(storedEvent(eventRow(row, date)));
    } else {
      out.push(...decodeStreamBatch(row.body as string, Number(row.offset), from, limit - out.length, date(row.created_at)));
    }
  }
  return out;
}

/** A selected V6 events row as `storedEvent` takes it. */
function eventRow(row: Row, date: (value: unknown) => Date): Parameters<typeof storedEvent>[0] {
  return {
    offset: Number(row.offset),
    kind: row.kind as string,
    step: (row.step as string | null) ?? null,
    attempt: row.attempt === null || row.attempt === undefined ? null : Number(row.attempt),
    data: (row.data as string | null) ?? null,
    status: (row.status as string | null) ?? null,
    detail: (row.detail as string | null) ?? null,
    createdAt: date(row.created_at),
  };
}
