/**
 * One WaypointCheckpointSaver per test on isolated storage (a temp SQLite file, its own PostgreSQL schema,
 * its own Redis key prefix), plus raw access to what the backend stored, so tests can count rows, read
 * the bytes at rest and tamper with them the way a bad disk or a careless operator would.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { RunnableConfig } from '@langchain/core/runnables';
import type { Checkpoint, CheckpointMetadata } from '@langchain/langgraph-checkpoint';
import { Redis } from 'ioredis';
import { WaypointCheckpointSaver, type WaypointCheckpointSaverOptions } from '../../src/integrations/langgraph';
import { checkpointField, langGraphRedisKeys } from '../../src/integrations/langgraph/redis-keys';
import { TypeOrmCheckpointStore } from '../../src/storage/sql/typeorm-store';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';

export type Backend = 'sqlite' | 'postgres' | 'redis';
export const BACKENDS: Backend[] = ['sqlite', 'postgres', 'redis'];
export const REDIS_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** What a test may inspect or break underneath the saver. */
export interface RawAccess {
  counts(threadId: string): Promise<{ checkpoints: number; blobs: number; writes: number }>;
  /** Every stored payload of a thread (checkpoints, metadata, channel values, writes) as bytes. */
  payloads(threadId: string): Promise<Buffer[]>;
  /** Bytes of the storage itself where it is a file (SQLite); empty elsewhere. */
  fileBytes(): Buffer;
  /** Changes one byte of a checkpoint's stored metadata. */
  tamperCheckpoint(threadId: string, checkpointNs: string, checkpointId: string): Promise<void>;
  /** Changes the stored bytes of every channel value of a thread. */
  tamperBlobs(threadId: string): Promise<void>;
  /** Changes the stored bytes of every pending write of a checkpoint. */
  tamperWrites(threadId: string, checkpointNs: string, checkpointId: string): Promise<void>;
  /** Deletes every channel value of a thread, leaving its checkpoints dangling. */
  deleteBlobs(threadId: string): Promise<void>;
}

export interface SaverFixture {
  saver: WaypointCheckpointSaver;
  raw: RawAccess;
  /** Another saver on the same storage (e.g. with other options), closed with the fixture. */
  another(options?: Omit<WaypointCheckpointSaverOptions, 'store' | 'redis'>): WaypointCheckpointSaver;
  close(): Promise<void>;
}

const flip = (b: Buffer): Buffer => {
  const copy = Buffer.from(b);
  copy[copy.length - 1] = copy[copy.length - 1] ^ 0x01;
  return copy;
};

/** A saver on fresh storage of `backend`; `name` makes the storage unique (use the test's name). */
export async function saverFixture(backend: Backend, name: string, options: Omit<WaypointCheckpointSaverOptions, 'store' | 'redis'> = {}): Promise<SaverFixture> {
  if (backend === 'redis') return redisFixture(name, options);
  const extra: WaypointCheckpointSaver[] = [];
  let store: TypeOrmCheckpointStore;
  let cleanup: () => Promise<void>;
  let dir = '';
  if (backend === 'sqlite') {
    dir = mkdtempSync(path.join(tmpdir(), 'waypoint-lg-'));
    store = new TypeOrmCheckpointStore({ type: 'sqlite', path: path.join(dir, 'saver.db') });
    cleanup = () => Promise.resolve(rmSync(dir, { recursive: true, force: true }));
  } else {
    const schema = schemaFor(`langgraph ${process.pid} ${name}`);
    await dropSchema(schema);
    store = new TypeOrmCheckpointStore({ type: 'postgres', url: PG_TEST_URL, schema, poolSize: 6 });
    cleanup = () => dropSchema(schema);
  }
  await store.init();
  const pg = backend === 'postgres';
  const schemaName = pg ? `"${(store.dataSource.options as { schema: string }).schema}".` : '';
  const t = (table: string) => `${schemaName}"waypoint_langgraph_${table}"`;
  const p = (i: number) => (pg ? `$${i}` : '?');
  const q = (sql: string, params: unknown[]) => store.dataSource.query<Record<string, unknown>[]>(sql, params);
  const raw: RawAccess = {
    async counts(threadId) {
      const [c] = await q(
        `SELECT (SELECT count(*) FROM ${t('checkpoints')} WHERE thread_id = ${p(1)}) AS checkpoints, (SELECT count(*) FROM ${t('blobs')} WHERE thread_id = ${p(2)}) AS blobs, (SELECT count(*) FROM ${t('writes')} WHERE thread_id = ${p(3)}) AS writes`,
        [threadId, threadId, threadId],
      );
      return { checkpoints: Number(c.checkpoints), blobs: Number(c.blobs), writes: Number(c.writes) };
    },
    async payloads(threadId) {
      const out: Buffer[] = [];
      for (const r of await q(`SELECT checkpoint, metadata FROM ${t('checkpoints')} WHERE thread_id = ${p(1)}`, [threadId])) out.push(r.checkpoint as Buffer, r.metadata as Buffer);
      for (const r of await q(`SELECT data FROM ${t('blobs')} WHERE thread_id = ${p(1)}`, [threadId])) out.push(r.data as Buffer);
      for (const r of await q(`SELECT data FROM ${t('writes')} WHERE thread_id = ${p(1)}`, [threadId])) out.push(r.data as Buffer);
      return out;
    },
    fileBytes() {
      if (!dir) return Buffer.alloc(0);
      return Buffer.concat(readdirSync(dir).map((f) => readFileSync(path.join(dir, f))));
    },
    async tamperCheckpoint(threadId, ns, id) {
      const [row] = await q(`SELECT metadata FROM ${t('checkpoints')} WHERE thread_id = ${p(1)} AND checkpoint_ns = ${p(2)} AND checkpoint_id = ${p(3)}`, [threadId, ns, id]);
      await q(`UPDATE ${t('checkpoints')} SET metadata = ${p(1)} WHERE thread_id = ${p(2)} AND checkpoint_ns = ${p(3)} AND checkpoint_id = ${p(4)}`, [
        flip(row.metadata as Buffer),
        threadId,
        ns,
        id,
      ]);
    },
    async tamperBlobs(threadId) {
      for (const r of await q(`SELECT address, data FROM ${t('blobs')} WHERE thread_id = ${p(1)}`, [threadId])) {
        await q(`UPDATE ${t('blobs')} SET data = ${p(1)} WHERE thread_id = ${p(2)} AND address = ${p(3)}`, [flip(r.data as Buffer), threadId, r.address]);
      }
    },
    async deleteBlobs(threadId) {
      await q(`DELETE FROM ${t('blobs')} WHERE thread_id = ${p(1)}`, [threadId]);
    },
    async tamperWrites(threadId, ns, id) {
      const rows = await q(`SELECT task_id, idx, data FROM ${t('writes')} WHERE thread_id = ${p(1)} AND checkpoint_ns = ${p(2)} AND checkpoint_id = ${p(3)}`, [threadId, ns, id]);
      for (const r of rows) {
        await q(
          `UPDATE ${t('writes')} SET data = ${p(1)} WHERE thread_id = ${p(2)} AND checkpoint_ns = ${p(3)} AND checkpoint_id = ${p(4)} AND task_id = ${p(5)} AND idx = ${p(6)}`,
          [flip(r.data as Buffer), threadId, ns, id, r.task_id, r.idx],
        );
      }
    },
  };
  const saver = new WaypointCheckpointSaver({ ...options, store });
  return {
    saver,
    raw,
    another: (more = {}) => {
      const s = new WaypointCheckpointSaver({ ...more, store });
      extra.push(s);
      return s;
    },
    async close() {
      for (const s of [saver, ...extra]) await s.close();
      await store.close();
      await cleanup();
    },
  };
}

function redisFixture(name: string, options: Omit<WaypointCheckpointSaverOptions, 'store' | 'redis'>): SaverFixture {
  const keyPrefix = `wpt:lg:${process.pid}:${schemaFor(name).slice(4, 16)}:`;
  const client = new Redis(REDIS_URL);
  const keys = langGraphRedisKeys(keyPrefix);
  const extra: WaypointCheckpointSaver[] = [];
  const decode = (json: string, field: string) => Buffer.from((JSON.parse(json) as Record<string, string>)[field], 'base64');
  const writesOf = (threadId: string) => client.smembers(keys.writeKeys(threadId));
  const raw: RawAccess = {
    async counts(threadId) {
      let writes = 0;
      for (const k of await writesOf(threadId)) writes += await client.hlen(k);
      return { checkpoints: await client.hlen(keys.checkpoints(threadId)), blobs: await client.hlen(keys.blobs(threadId)), writes };
    },
    async payloads(threadId) {
      const out: Buffer[] = [];
      for (const v of await client.hvals(keys.checkpoints(threadId))) out.push(decode(v, 'c'), decode(v, 'm'));
      for (const v of await client.hvals(keys.blobs(threadId))) out.push(decode(v, 'd'));
      for (const k of await writesOf(threadId)) for (const v of await client.hvals(k)) out.push(decode(v, 'd'));
      return out;
    },
    fileBytes: () => Buffer.alloc(0),
    async tamperCheckpoint(threadId, ns, id) {
      const field = checkpointField(ns, id);
      const record = JSON.parse((await client.hget(keys.checkpoints(threadId), field))!) as Record<string, string>;
      record.m = flip(Buffer.from(record.m, 'base64')).toString('base64');
      await client.hset(keys.checkpoints(threadId), field, JSON.stringify(record));
    },
    async tamperBlobs(threadId) {
      for (const [address, json] of Object.entries(await client.hgetall(keys.blobs(threadId)))) {
        const blob = JSON.parse(json) as Record<string, string>;
        blob.d = flip(Buffer.from(blob.d, 'base64')).toString('base64');
        await client.hset(keys.blobs(threadId), address, JSON.stringify(blob));
      }
    },
    async deleteBlobs(threadId) {
      await client.del(keys.blobs(threadId));
    },
    async tamperWrites(threadId, ns, id) {
      const key = keys.writes(threadId, ns, id);
      for (const [field, json] of Object.entries(await client.hgetall(key))) {
        const w = JSON.parse(json) as Record<string, string>;
        w.d = flip(Buffer.from(w.d, 'base64')).toString('base64');
        await client.hset(key, field, JSON.stringify(w));
      }
    },
  };
  const saver = new WaypointCheckpointSaver({ ...options, redis: { url: REDIS_URL, keyPrefix } });
  return {
    saver,
    raw,
    another: (more = {}) => {
      const s = new WaypointCheckpointSaver({ ...more, redis: { url: REDIS_URL, keyPrefix } });
      extra.push(s);
      return s;
    },
    async close() {
      for (const t of await saver.listThreads({ limit: 100_000 })) await saver.deleteThread(t.threadId);
      for (const s of [saver, ...extra]) await s.close();
      client.disconnect();
    },
  };
}

/** A checkpoint as LangGraph hands it to `put` (format v4). */
export function checkpoint(id: string, values: Record<string, unknown>, versions: Record<string, number | string>): Checkpoint {
  return { v: 4, id, ts: new Date(0).toISOString(), channel_values: values, channel_versions: versions, versions_seen: {} };
}

export function meta(step: number, extra: Record<string, unknown> = {}): CheckpointMetadata {
  return { source: 'loop', step, parents: {}, ...extra };
}

/** The config `put` receives: thread, namespace, and the parent checkpoint's id when there is one. */
export function cfg(threadId: string, parentId?: string, checkpointNs = ''): RunnableConfig {
  return { configurable: { thread_id: threadId, checkpoint_ns: checkpointNs, ...(parentId ? { checkpoint_id: parentId } : {}) } };
}

/** Ids that sort in creation order, like LangGraph's uuid6. */
export function ids(prefix: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}-${String(i + 1).padStart(4, '0')}`);
}

export async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of iterable) out.push(item);
  return out;
}

/** Rejection matcher for assert.rejects: a WaypointError with this code (and message parts). */
export function code(expected: string, ...parts: string[]): (err: unknown) => boolean {
  return (err) => {
    const e = err as { code?: string; message?: string };
    if (e.code !== expected) throw new Error(`expected code ${expected}, got ${e.code}: ${e.message}`);
    for (const part of parts) if (!e.message?.includes(part)) throw new Error(`message lacks '${part}': ${e.message}`);
    return true;
  };
}
