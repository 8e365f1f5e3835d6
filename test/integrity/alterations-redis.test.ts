import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { redisStorage } from '../../src/storage/redis/module';
import { redisKeys } from '../../src/storage/redis/keys';
import { defineAlterationSuite, type RawBackend, type RawValue, type Snapshot } from './alterations-suite';

const REDIS_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

// SQL column names -> the (short) keys of a step entry (src/storage/redis/codec.ts); times are epoch ms there.
const FIELDS: Record<string, string> = {
  checkpoint_id: 'c',
  agent_index: 'ai',
  agent_id: 'a',
  step_index: 'si',
  step_name: 'n',
  status: 's',
  output: 'o',
  memory: 'm',
  idempotency_key: 'k',
  side_effects_committed: 'e',
  started_at: 't0',
  completed_at: 't1',
  attempt: 'at',
  sha256: 'h',
};

/**
 * The alteration suite on Redis: keys altered with ioredis under a prefix of the test's own (deleted
 * afterwards; never FLUSHDB). A changed run_id or sequence moves the entry to that run's hash or field.
 */
defineAlterationSuite(() => {
  const prefix = `wpt-alter:${randomUUID().slice(0, 8)}:`;
  const keys = redisKeys(prefix);
  const admin = new Redis(REDIS_URL);
  const all = async () => (await admin.keys(`${prefix}*`)).sort();
  const entry = async (runId: string, sequence: number): Promise<Record<string, unknown>> => {
    const text = await admin.hget(keys.steps(runId), String(sequence));
    if (text === null) throw new Error(`no entry ${runId}#${sequence}`);
    return JSON.parse(text) as Record<string, unknown>;
  };
  const hex = (b: Buffer) => b.toString('hex');
  const content = async (key: string): Promise<string> => {
    const type = await admin.type(key);
    switch (type) {
      case 'string':
        return `string ${hex((await admin.getBuffer(key))!)}`;
      case 'hash':
        return `hash ${JSON.stringify(
          Object.entries(await admin.hgetallBuffer(key))
            .map(([f, v]) => [f, hex(v)])
            .sort(),
        )}`;
      case 'list':
        return `list ${JSON.stringify((await admin.lrangeBuffer(key, 0, -1)).map(hex))}`;
      case 'set':
        return `set ${JSON.stringify((await admin.smembersBuffer(key)).map(hex).sort())}`;
      case 'zset':
        return `zset ${JSON.stringify(await admin.zrange(key, 0, -1, 'WITHSCORES'))}`;
      case 'stream':
        return `stream ${JSON.stringify(await admin.xrange(key, '-', '+'))}`;
      default:
        return `${type} ${hex(await admin.dumpBuffer(key))}`;
    }
  };
  const backend: RawBackend = {
    name: 'redis',
    storeUrl: `${REDIS_URL}?prefix=${encodeURIComponent(prefix)}`,
    modules: () => [redisStorage({ url: REDIS_URL, keyPrefix: prefix })],
    async dump(): Promise<Snapshot> {
      const data: [string, Buffer, number][] = [];
      for (const key of await all()) {
        const dumped = await admin.dumpBuffer(key);
        if (dumped) data.push([key, dumped, await admin.pttl(key)]);
      }
      // DUMP bytes restore a key exactly, but are no canonical form (a restored hashtable may serialize its
      // fields in another order), so the text compared is the content, read by type.
      const lines: string[] = [];
      for (const [key] of data) lines.push(`${key} ${await content(key)}`);
      return { text: lines.join('\n'), data };
    },
    async restore(snapshot: Snapshot): Promise<void> {
      const current = await all();
      const multi = admin.multi();
      if (current.length > 0) multi.del(...current);
      for (const [key, bytes, ttl] of snapshot.data as [string, Buffer, number][]) multi.restore(key, ttl > 0 ? ttl : 0, bytes, 'REPLACE');
      await multi.exec();
    },
    async step(runId, sequence) {
      const stored = await entry(runId, sequence);
      const row: Record<string, RawValue> = { run_id: runId, sequence };
      for (const [column, field] of Object.entries(FIELDS)) row[column] = stored[field] as RawValue;
      return row;
    },
    async updateStep(runId, sequence, changes) {
      const stored = await entry(runId, sequence);
      for (const [column, value] of Object.entries(changes)) if (FIELDS[column]) stored[FIELDS[column]] = value;
      const toRun = typeof changes.run_id === 'string' ? changes.run_id : runId;
      const toSequence = typeof changes.sequence === 'number' ? changes.sequence : sequence;
      stored.q = toSequence;
      await admin.hdel(keys.steps(runId), String(sequence));
      await admin.hset(keys.steps(toRun), String(toSequence), JSON.stringify(stored));
    },
    async deleteStep(runId, sequence) {
      await admin.hdel(keys.steps(runId), String(sequence));
    },
    async runField(runId, column) {
      return String(await admin.hget(keys.run(runId), column));
    },
    async updateRun(runId, column, value) {
      await admin.hset(keys.run(runId), column, value);
    },
    async dispose() {
      const left = await all();
      if (left.length > 0) await admin.del(...left);
      admin.disconnect();
    },
  };
  return backend;
});
