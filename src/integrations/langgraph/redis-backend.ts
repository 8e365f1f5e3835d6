import type { Redis } from 'ioredis';
import { DEFAULT_REDIS_URL, ownRedisClient } from '../../storage/redis-client';
import type { CheckpointKey, CheckpointQuery, CheckpointWrite, PutOutcome, SaverBackend } from './backend';
import { type CheckpointLocation, LangGraphCheckpointCorruptedError } from './errors';
import type { BlobRow, CheckpointRow, PruneResult, ThreadInfo, WriteRow } from './records';
import {
  DEFAULT_LANGGRAPH_KEY_PREFIX,
  SEP,
  type LangGraphRedisKeys,
  byIdMember,
  bytesBefore,
  checkpointField,
  globalMember,
  langGraphRedisKeys,
  lexRange,
  writeField,
} from './redis-keys';
import { type LangGraphScripts, defineLangGraphScripts } from './redis-scripts';

/** Where the saver keeps its records on Redis. */
export interface LangGraphRedisOptions {
  /** Connection URL of the saver's own client. Default 'redis://127.0.0.1:6379'. Ignored with `client`. */
  url?: string;
  /** Use this client instead of creating one; the saver never quits a client it did not create. */
  client?: Redis;
  /** Prefix of every key. Default 'waypoint:lg:'. Give each application (and each test) its own. */
  keyPrefix?: string;
  /** Own client only: a command with no reply after this long fails. Default 10 000 ms. */
  commandTimeoutMs?: number;
}

interface CheckpointRecord {
  p: string | null;
  ct: string;
  c: string;
  mt: string;
  m: string;
  ch: string;
  s: string;
}

/**
 * The LangGraph saver's records on Redis: hashes per thread for checkpoints, blobs and each checkpoint's
 * writes, sorted sets (members ordered by bytes) as indexes, never KEYS or SCAN. Every write is one Lua
 * script. A checkpoint write reads the parent's channel references first, then the script re-checks
 * that each inherited blob still exists before writing, so a concurrent prune cannot leave a dangling
 * reference. Durability is the server's (see RedisCheckpointStore: AOF with `appendfsync always`).
 */
export class RedisSaverBackend implements SaverBackend {
  readonly name = 'redis' as const;
  readonly keys: LangGraphRedisKeys;
  private readonly client: Redis & LangGraphScripts;
  private readonly ownsClient: boolean;
  private connecting: Promise<void> | undefined;

  constructor(options: LangGraphRedisOptions = {}) {
    this.keys = langGraphRedisKeys(options.keyPrefix ?? DEFAULT_LANGGRAPH_KEY_PREFIX);
    this.ownsClient = options.client === undefined;
    const client = options.client ?? ownRedisClient(options.url ?? DEFAULT_REDIS_URL, { maxRetriesPerRequest: 2, commandTimeoutMs: options.commandTimeoutMs ?? 10_000 });
    this.client = defineLangGraphScripts(client);
  }

  async putCheckpoint(write: CheckpointWrite): Promise<PutOutcome> {
    await this.connected();
    const k = this.keys;
    const t = write.threadId;
    const parentId = write.parentCheckpointId;
    const parent = parentId === null ? null : await this.client.hget(k.checkpoints(t), checkpointField(write.checkpointNs, parentId));
    const parentChannels = parent === null ? null : parseRecord(parent, { threadId: t, checkpointNs: write.checkpointNs, checkpointId: parentId! }).ch;
    const { row, blobs, inherited } = write.build(parentChannels);
    const record: CheckpointRecord = {
      p: row.parentCheckpointId,
      ct: row.checkpointType,
      c: base64(row.checkpoint),
      mt: row.metadataType,
      m: base64(row.metadata),
      ch: row.channels,
      s: row.sha256,
    };
    const blobArgs = blobs.flatMap((b) => [b.address, JSON.stringify({ t: b.type, d: base64(b.data) })]);
    const outcome = await this.client.waypointLgPut(
      k.checkpoints(t),
      k.blobs(t),
      k.byNamespace(t),
      k.byId(t),
      k.allCheckpoints(),
      k.threads(),
      checkpointField(row.checkpointNs, row.checkpointId),
      JSON.stringify(record),
      byIdMember(row.checkpointNs, row.checkpointId),
      globalMember(t, row.checkpointNs, row.checkpointId),
      t,
      inherited.length,
      ...inherited,
      ...blobArgs,
    );
    return outcome === 'OK' ? 'written' : 'blobs-missing';
  }

  async getCheckpoint(threadId: string, checkpointNs: string, checkpointId: string | undefined): Promise<CheckpointRow | undefined> {
    await this.connected();
    const k = this.keys;
    if (checkpointId !== undefined) {
      const record = await this.client.hget(k.checkpoints(threadId), checkpointField(checkpointNs, checkpointId));
      return record === null ? undefined : toRow(threadId, checkpointNs, checkpointId, record);
    }
    const { max, min } = lexRange({ prefix: `${checkpointNs}${SEP}` });
    const found = (await this.client.waypointLgLatest(k.byNamespace(threadId), k.checkpoints(threadId), max, min)) as [string, string] | null;
    if (!found) return undefined;
    return toRow(threadId, checkpointNs, found[0].slice(checkpointNs.length + 1), found[1]);
  }

  async listCheckpoints(q: CheckpointQuery): Promise<CheckpointRow[]> {
    await this.connected();
    const k = this.keys;
    if (q.threadId !== undefined && q.checkpointNs !== undefined && q.checkpointId !== undefined) {
      // One checkpoint named in full: a lookup, not a walk of the index.
      if (q.after !== undefined || (q.beforeId !== undefined && !bytesBefore(q.checkpointId, q.beforeId))) return [];
      const row = await this.getCheckpoint(q.threadId, q.checkpointNs, q.checkpointId);
      return row ? [row] : [];
    }
    // Which index, which members, and how a member names its checkpoint.
    let index: string;
    let prefix: string | undefined;
    let below: string | undefined;
    let parse: (member: string) => { threadId: string; checkpointNs: string; checkpointId: string };
    if (q.threadId !== undefined && q.checkpointNs !== undefined) {
      const [t, ns] = [q.threadId, q.checkpointNs];
      index = k.byNamespace(t);
      prefix = `${ns}${SEP}`;
      below = lowest(q.beforeId === undefined ? undefined : checkpointField(ns, q.beforeId), q.after && checkpointField(ns, q.after.checkpointId));
      parse = (m) => ({ threadId: t, checkpointNs: ns, checkpointId: m.slice(ns.length + 1) });
    } else if (q.threadId !== undefined) {
      const t = q.threadId;
      index = k.byId(t);
      below = lowest(q.beforeId, q.after && byIdMember(q.after.checkpointNs, q.after.checkpointId));
      parse = (m) => {
        const sep = m.indexOf(SEP);
        return { threadId: t, checkpointId: m.slice(0, sep), checkpointNs: m.slice(sep + 1) };
      };
    } else {
      index = k.allCheckpoints();
      below = lowest(q.beforeId, q.after && globalMember(q.after.threadId, q.after.checkpointNs, q.after.checkpointId));
      parse = (m) => {
        const [checkpointId = '', threadId = '', checkpointNs = ''] = m.split(SEP);
        return { threadId, checkpointNs, checkpointId };
      };
    }
    const rows: CheckpointRow[] = [];
    // Members whose record vanished (pruned meanwhile) are skipped; the page is refilled from the index.
    while (rows.length < q.limit) {
      const { max, min } = lexRange({ prefix, below });
      const members = await this.client.zrevrangebylex(index, max, min, 'LIMIT', 0, q.limit - rows.length);
      if (members.length === 0) break;
      below = members[members.length - 1];
      const keys = members
        .map(parse)
        .filter((m) => (q.checkpointNs === undefined || m.checkpointNs === q.checkpointNs) && (q.checkpointId === undefined || m.checkpointId === q.checkpointId));
      const pipeline = this.client.pipeline();
      for (const m of keys) pipeline.hget(k.checkpoints(m.threadId), checkpointField(m.checkpointNs, m.checkpointId));
      const records = await execOrThrow(pipeline);
      keys.forEach((m, i) => {
        const record = records[i] as string | null;
        if (record !== null) rows.push(toRow(m.threadId, m.checkpointNs, m.checkpointId, record));
      });
    }
    return rows;
  }

  async getBlobs(threadId: string, addresses: string[]): Promise<Map<string, BlobRow>> {
    if (addresses.length === 0) return new Map();
    await this.connected();
    const values = await this.client.hmget(this.keys.blobs(threadId), ...addresses);
    const out = new Map<string, BlobRow>();
    addresses.forEach((address, i) => {
      const value = values[i];
      if (value === null || value === undefined) return;
      const blob = JSON.parse(value) as { t: string; d: string };
      out.set(address, { address, type: blob.t, data: Buffer.from(blob.d, 'base64') });
    });
    return out;
  }

  async getWrites(threadId: string, checkpoints: CheckpointKey[]): Promise<WriteRow[]> {
    if (checkpoints.length === 0) return [];
    await this.connected();
    const pipeline = this.client.pipeline();
    for (const c of checkpoints) pipeline.hgetall(this.keys.writes(threadId, c.checkpointNs, c.checkpointId));
    const hashes = (await execOrThrow(pipeline)) as Record<string, string>[];
    return checkpoints.flatMap((c, i) =>
      Object.entries(hashes[i] ?? {}).map(([field, value]): WriteRow => {
        const sep = field.lastIndexOf(SEP);
        const w = JSON.parse(value) as { c: string; t: string; d: string; p: string; s: string };
        return {
          threadId,
          checkpointNs: c.checkpointNs,
          checkpointId: c.checkpointId,
          taskId: field.slice(0, sep),
          idx: Number(field.slice(sep + 1)),
          channel: w.c,
          type: w.t,
          data: Buffer.from(w.d, 'base64'),
          taskPath: w.p,
          sha256: w.s,
        };
      }),
    );
  }

  async putWrites(rows: WriteRow[]): Promise<void> {
    const first = rows[0];
    if (!first) return;
    await this.connected();
    const args = rows.flatMap((w) => [
      writeField(w.taskId, w.idx),
      JSON.stringify({ c: w.channel, t: w.type, d: base64(w.data), p: w.taskPath, s: w.sha256 }),
      w.idx < 0 ? '1' : '0',
    ]);
    await this.client.waypointLgPutWrites(this.keys.writes(first.threadId, first.checkpointNs, first.checkpointId), this.keys.writeKeys(first.threadId), ...args);
  }

  async deleteThread(threadId: string): Promise<void> {
    await this.connected();
    const k = this.keys;
    const t = threadId;
    await this.client.waypointLgDeleteThread(k.checkpoints(t), k.blobs(t), k.writeKeys(t), k.byNamespace(t), k.byId(t), k.allCheckpoints(), k.threads(), t);
  }

  async prune(threadId: string, keepLast: number): Promise<PruneResult> {
    await this.connected();
    const k = this.keys;
    const t = threadId;
    const stem = k.writes(t, '', '').slice(0, -SEP.length); // the writes key of field '' minus its field
    const [checkpoints, writes, blobs] = (await this.client.waypointLgPrune(
      k.checkpoints(t),
      k.blobs(t),
      k.writeKeys(t),
      k.byNamespace(t),
      k.byId(t),
      k.allCheckpoints(),
      t,
      keepLast,
      stem,
    )) as [number, number, number];
    return { checkpoints, writes, blobs };
  }

  async listThreads(options: { updatedBefore?: Date; limit: number }): Promise<ThreadInfo[]> {
    await this.connected();
    const max = options.updatedBefore ? `(${options.updatedBefore.getTime()}` : '+inf';
    const flat = await this.client.zrangebyscore(this.keys.threads(), '-inf', max, 'WITHSCORES', 'LIMIT', 0, options.limit);
    const out: ThreadInfo[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) out.push({ threadId: flat[i], updatedAt: new Date(Number(flat[i + 1])) });
    return out;
  }

  async close(): Promise<void> {
    if (!this.ownsClient || this.client.status === 'end') return;
    if (this.client.status === 'ready') await this.client.quit().catch(() => this.client.disconnect());
    else this.client.disconnect();
  }

  private async connected(): Promise<void> {
    // Connect explicitly the first time only; afterwards ioredis reconnects by itself.
    if (this.client.status === 'wait' && this.connecting === undefined) {
      this.connecting = this.client.connect().finally(() => (this.connecting = undefined));
    }
    if (this.connecting) await this.connecting;
  }
}

/** A stored checkpoint record; one that does not parse is corrupted, not a store failure. */
function parseRecord(text: string, where: CheckpointLocation): CheckpointRecord {
  try {
    const record = JSON.parse(text) as CheckpointRecord;
    // plain Error: caught below and wrapped into LangGraphCheckpointCorruptedError (CHECKPOINT_CORRUPTED).
    if (typeof record.ch !== 'string' || typeof record.c !== 'string' || typeof record.m !== 'string') throw new Error('fields are missing');
    return record;
  } catch (err) {
    throw new LangGraphCheckpointCorruptedError(where, 'checkpoint', `its stored record does not parse (${(err as Error).message})`);
  }
}

function toRow(threadId: string, checkpointNs: string, checkpointId: string, text: string): CheckpointRow {
  const r = parseRecord(text, { threadId, checkpointNs, checkpointId });
  return {
    threadId,
    checkpointNs,
    checkpointId,
    parentCheckpointId: r.p,
    checkpointType: r.ct,
    checkpoint: Buffer.from(r.c, 'base64'),
    metadataType: r.mt,
    metadata: Buffer.from(r.m, 'base64'),
    channels: r.ch,
    sha256: r.s,
  };
}

function base64(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/** The lower of two exclusive upper bounds, in byte order. */
function lowest(a: string | undefined, b: string | undefined): string | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return bytesBefore(a, b) ? a : b;
}

async function execOrThrow(pipeline: ReturnType<Redis['pipeline']>): Promise<unknown[]> {
  const results = (await pipeline.exec()) ?? [];
  return results.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}
