import type { Redis } from 'ioredis';
import { LeaseLostError, RunNotFoundError } from '../../contract/errors';
import { type Fence, type StoredStreamEvent, type StreamEvent, checkStreamAppend, checkStreamRead } from '../../contract/checkpoint-store';
import { decodeStreamBatch, encodeStreamBatch, storedEvent } from '../stream-rows';
import type { RedisStoreContext } from './context';

/**
 * How long one blocked XREAD of a waiter lasts before it is sent again (below the store client's
 * command timeout, which a duplicated connection inherits).
 */
export const REDIS_STREAM_BLOCK_MS = 2_000;

/**
 * The run-stream methods on Redis: a run's events are a Redis stream (keys.ts `events`), one entry per
 * append (a batch, stream-rows.ts), entry id `<end>-0` where end is the offset after its last event, so
 * a read from an offset is an XRANGE from id `<offset + 1>-0` and "anything at or after offset n" is an
 * XREAD after id `n-0`. An append is one script (scripts-stream.ts): fence, offset and XADD at once.
 *
 * Waiting: each waiter blocks on a connection of its own (a duplicate of the store's client) with
 * XREAD BLOCK, woken by the server the moment an entry is added from any process, and aborted by
 * closing that connection. A woken waiter's connection is kept for the next wait (a reader waits again
 * at once; see `takeWaiterConnection`). One connection per waiter is the simple form: a process following
 * thousands of runs at once would want them multiplexed on one blocked XREAD (left for later).
 */

/** Appends events under an optional fence; returns the first offset. */
export async function appendEvents(ctx: RedisStoreContext, runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number> {
  checkStreamAppend(runId, events);
  const epoch = fence ? String(fence.epoch) : '';
  const reply = await ctx.client.waypointAppendEvents(ctx.keys.run(runId), ctx.keys.events(runId), epoch, String(events.length), encodeStreamBatch(events));
  if (reply === 'FENCED' || (reply === 'MISSING' && fence)) throw new LeaseLostError(runId, fence?.epoch ?? 0);
  if (reply === 'MISSING') throw new RunNotFoundError(runId);
  return Number(reply);
}

/**
 * The entries holding offsets from `from` on (those whose end id is past `from`), a page of at most
 * `READ_PAGE` entries at a time until `limit` events are read or the stream ends.
 */
export async function readEvents(ctx: RedisStoreContext, runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
  const max = checkStreamRead(runId, from, limit);
  const out: StoredStreamEvent[] = [];
  let start = `${from + 1}-0`;
  for (;;) {
    const page = Math.min(max - out.length, READ_PAGE);
    const entries = await ctx.client.xrange(ctx.keys.events(runId), start, '+', 'COUNT', page);
    for (const [id, fields] of entries) {
      if (out.length < max) out.push(...entryEvents(id, fields, from, max - out.length));
    }
    if (out.length >= max || entries.length < page) return out;
    start = `${Number(entries[entries.length - 1][0].split('-')[0]) + 1}-0`;
  }
}

/** The most stream entries one XRANGE of `readEvents` asks for (an entry holds one append's events). */
const READ_PAGE = 256;

/** Deletes the run's stream key (its length with it) in one MULTI; returns how many events it held. */
export async function dropStream(ctx: RedisStoreContext, runId: string): Promise<number> {
  const key = ctx.keys.events(runId);
  const replies = await ctx.client.multi().xrevrange(key, '+', '-', 'COUNT', 1).del(key).exec();
  // plain Error: an internal invariant (ioredis discards a MULTI only when its connection broke); the store's guard types it.
  const [error, last] = replies?.[0] ?? [new Error('the MULTI was discarded'), []];
  if (error) throw error;
  return endOffset(last as [string, string[]][]);
}

/** The stream's next offset: its last entry's id (see scripts-stream.ts). */
export async function streamLength(ctx: RedisStoreContext, runId: string): Promise<number> {
  return endOffset(await ctx.client.xrevrange(ctx.keys.events(runId), '+', '-', 'COUNT', 1));
}

function endOffset(last: [string, string[]][]): number {
  return last.length > 0 ? Number(last[0][0].split('-')[0]) : 0;
}

/** See the module comment: one blocked connection per waiter, closed on abort. */
export async function waitForEvents(ctx: RedisStoreContext, runId: string, from: number, signal: AbortSignal): Promise<boolean> {
  checkStreamRead(runId, from);
  if (signal.aborted) return false;
  if ((await streamLength(ctx, runId)) > from) return true;
  const conn = takeWaiterConnection(ctx.client);
  let reusable = false;
  const abort = () => conn.disconnect();
  signal.addEventListener('abort', abort, { once: true });
  try {
    await ready(conn);
    while (!signal.aborted) {
      const reply = await conn.xread('BLOCK', REDIS_STREAM_BLOCK_MS, 'STREAMS', ctx.keys.events(runId), `${from}-0`);
      if (reply && reply.length > 0) return (reusable = true);
    }
    return false;
  } catch (error) {
    if (signal.aborted) return false; // the abort closed the connection under the blocked read
    throw error;
  } finally {
    signal.removeEventListener('abort', abort);
    if (reusable && !signal.aborted) keepWaiterConnection(ctx.client, conn);
    else conn.disconnect();
  }
}

/**
 * Idle waiter connections per store client: a reader that was woken waits again at once, and opening a
 * connection for it (a TCP handshake and the client's setup commands) was most of the wake-up latency.
 * At most `IDLE_WAITERS` are kept, each closed after `IDLE_WAITER_MS` unused or when the client ends.
 */
const idleWaiters = new WeakMap<Redis, { conn: Redis; timer: NodeJS.Timeout }[]>();
const IDLE_WAITERS = 4;
const IDLE_WAITER_MS = 2_000;

function takeWaiterConnection(client: Redis): Redis {
  const idle = idleWaiters.get(client);
  for (let kept = idle?.pop(); kept; kept = idle?.pop()) {
    clearTimeout(kept.timer);
    if (kept.conn.status === 'ready') return kept.conn;
    kept.conn.disconnect();
  }
  const conn = client.duplicate();
  conn.on('error', () => {}); // each command's rejection reports the failure
  return conn;
}

function keepWaiterConnection(client: Redis, conn: Redis): void {
  let idle = idleWaiters.get(client);
  if (!idle) {
    const list: { conn: Redis; timer: NodeJS.Timeout }[] = [];
    idle = list;
    idleWaiters.set(client, list);
    client.once('end', () => list.splice(0).forEach((kept) => (clearTimeout(kept.timer), kept.conn.disconnect())));
  }
  if (client.status === 'end' || conn.status !== 'ready' || idle.length >= IDLE_WAITERS) return void conn.disconnect();
  const list = idle;
  const timer = setTimeout(() => {
    const at = list.findIndex((kept) => kept.conn === conn);
    if (at >= 0) list.splice(at, 1);
    conn.disconnect();
  }, IDLE_WAITER_MS);
  timer.unref();
  list.push({ conn, timer });
}

async function ready(conn: Redis): Promise<void> {
  if (conn.status === 'wait') await conn.connect();
  else if (conn.status !== 'ready') await new Promise<void>((resolve, reject) => (conn.once('ready', resolve), conn.once('end', () => reject(new Error('connection ended'))))); // plain Error: the cause clause of STORE_UNAVAILABLE
}

/** The events of one entry from offset `from` on, at most `limit`: a batch (field b), or one event written per entry before. */
function entryEvents(id: string, fields: string[], from: number, limit: number): StoredStreamEvent[] {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i], fields[i + 1]);
  const end = Number(id.split('-')[0]);
  const createdAt = new Date(Number(f.get('t')));
  const body = f.get('b');
  if (body !== undefined) return decodeStreamBatch(body, end - Number(f.get('n')), from, limit, createdAt);
  return end - 1 >= from ? [storedEvent(entryRow(end - 1, f, createdAt))] : [];
}

function entryRow(offset: number, f: Map<string, string>, createdAt: Date): Parameters<typeof storedEvent>[0] {
  return {
    offset,
    kind: f.get('k') ?? '',
    step: f.get('s') ?? null,
    attempt: f.has('a') ? Number(f.get('a')) : null,
    data: f.get('d') ?? null,
    status: f.get('st') ?? null,
    detail: f.get('dt') ?? null,
    createdAt,
  };
}
