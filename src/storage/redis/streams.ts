import type { Redis } from 'ioredis';
import { LeaseLostError, RunNotFoundError } from '../../contract/errors';
import { type Fence, type StoredStreamEvent, type StreamEvent, checkStreamAppend, checkStreamRead } from '../../contract/checkpoint-store';
import { storedEvent, streamRow } from '../stream-rows';
import type { RedisStoreContext } from './context';

/**
 * How long one blocked XREAD of a waiter lasts before it is sent again (below the store client's
 * command timeout, which a duplicated connection inherits).
 */
export const REDIS_STREAM_BLOCK_MS = 2_000;

/**
 * The run-stream methods on Redis: a run's events are a Redis stream (keys.ts `events`), entry id
 * `<offset + 1>-0`, so a read from an offset is one XRANGE and "anything at or after offset n" is an
 * XREAD after id `n-0`. An append is one script (scripts-stream.ts): fence, offset and XADDs at once.
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
  const args: string[] = [fence ? String(fence.epoch) : ''];
  const arg = (value: string | number | null) => (value === null ? '' : `1${value}`);
  for (const event of events) {
    const row = streamRow(event, 0, new Date(0));
    args.push(arg(row.kind), arg(row.step), arg(row.attempt), arg(row.data), arg(row.status), arg(row.detail));
  }
  const reply = await ctx.client.waypointAppendEvents(ctx.keys.run(runId), ctx.keys.events(runId), ...args);
  if (reply === 'FENCED' || (reply === 'MISSING' && fence)) throw new LeaseLostError(runId, fence?.epoch ?? 0);
  if (reply === 'MISSING') throw new RunNotFoundError(runId);
  return Number(reply);
}

export async function readEvents(ctx: RedisStoreContext, runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
  const max = checkStreamRead(runId, from, limit);
  const entries = await ctx.client.xrange(ctx.keys.events(runId), `${from + 1}-0`, '+', 'COUNT', max);
  return entries.map(([id, fields]) => storedEvent(entryRow(id, fields)));
}

/** Deletes the run's stream key (its length with it) in one MULTI; returns how many events it held. */
export async function dropStream(ctx: RedisStoreContext, runId: string): Promise<number> {
  const key = ctx.keys.events(runId);
  const replies = await ctx.client.multi().xlen(key).del(key).exec();
  // plain Error: an internal invariant (ioredis discards a MULTI only when its connection broke); the store's guard types it.
  const [error, length] = replies?.[0] ?? [new Error('the MULTI was discarded'), 0];
  if (error) throw error;
  return Number(length);
}

export function streamLength(ctx: RedisStoreContext, runId: string): Promise<number> {
  return ctx.client.xlen(ctx.keys.events(runId));
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

function entryRow(id: string, fields: string[]): Parameters<typeof storedEvent>[0] {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i], fields[i + 1]);
  return {
    offset: Number(id.split('-')[0]) - 1,
    kind: f.get('k') ?? '',
    step: f.get('s') ?? null,
    attempt: f.has('a') ? Number(f.get('a')) : null,
    data: f.get('d') ?? null,
    status: f.get('st') ?? null,
    detail: f.get('dt') ?? null,
    createdAt: new Date(Number(f.get('t'))),
  };
}
