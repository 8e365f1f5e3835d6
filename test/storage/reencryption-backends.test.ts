import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { EncryptingCheckpointStore, postgresStorage, redisStorage, sqliteStorage, tieredStorage, type EncryptionOptions, type Waypoint, type WaypointError } from '../../src/index';
import { scanRun } from '../../src/cli/integrity-scan';
import { PayloadCipher } from '../../src/storage/payload-cipher';
import { type Hooks, ObservedPipeline, observedWaypoint } from '../integrations/observability-pipeline';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { REDIS_TEST_URL, deleteKeysUnder } from '../lease/backends';

/**
 * Key rotation end to end on each real store: runs written under k1 (and one before encryption was
 * enabled), k2 made active, `reencryptAll`, then a process holding only k2 loads, verifies and resumes
 * every run. The memory-store cases of reencryptRun are in reencryption.test.ts.
 */

const k1 = randomBytes(32);
const k2 = randomBytes(32);
const K1: EncryptionOptions = { activeKeyId: 'k1', keys: { k1 } };
const ROTATED: EncryptionOptions = { activeKeyId: 'k2', keys: { k1, k2 } };
const ONLY_K2: EncryptionOptions = { activeKeyId: 'k2', keys: { k2 } };
const RUNS = ['legacy', 'done', 'paused', 'failed'];

/** Where a backend's data lives for one test: a fresh storage module per Waypoint, all on that place. */
interface Place {
  storage(): ContainerModule;
  cleanup(): Promise<void>;
}

function sqlitePlace(): Place {
  const { file, remove } = tempSqlitePath();
  return { storage: () => sqliteStorage({ path: file }), cleanup: () => Promise.resolve(remove()) };
}

function postgresPlace(name: string): Place {
  const schema = schemaFor(`reencryption: ${name}`);
  return { storage: () => postgresStorage({ url: PG_TEST_URL, schema, poolSize: 3 }), cleanup: () => dropSchema(schema) };
}

function redisPlace(name: string): Place {
  const keyPrefix = `wp-test:reenc:${createHash('sha256').update(name).digest('hex').slice(0, 8)}-${randomUUID().slice(0, 8)}:`;
  return { storage: () => redisStorage({ url: REDIS_TEST_URL, keyPrefix }), cleanup: () => deleteKeysUnder(keyPrefix) };
}

function tieredPlace(name: string): Place {
  const schema = schemaFor(`reencryption: ${name}`);
  const keyPrefix = `wp-test:reenc-tier:${randomUUID().slice(0, 8)}:`;
  return {
    storage: () => tieredStorage({ redis: { url: REDIS_TEST_URL, keyPrefix }, postgres: { url: PG_TEST_URL, schema, poolSize: 3 } }),
    cleanup: async () => (await dropSchema(schema), await deleteKeysUnder(keyPrefix)),
  };
}

const opened: Waypoint[] = [];
after(async () => {
  for (const w of opened) await w.close().catch(() => undefined);
});

/** Every payload the store holds for the run, as stored (sealed). */
async function rawPayloads(store: EncryptingCheckpointStore, runId: string): Promise<string[]> {
  const loaded = (await store.inner.loadRun(runId))!;
  const values = [loaded.run.input, loaded.run.error, ...loaded.steps.flatMap((s) => [s.output, s.memory])];
  for (const op of await store.inner.listOperations(runId)) values.push(op.result, op.error);
  return values.filter((v): v is string => v !== null);
}

const keyIdOf = (text: string) => new PayloadCipher(ONLY_K2).keyIdOf(text);

const backends: { label: string; make: (name: string) => Place }[] = [
  { label: 'sqlite', make: () => sqlitePlace() },
  { label: 'postgres', make: postgresPlace },
  { label: 'redis', make: redisPlace },
  { label: 'tiered write-through', make: tieredPlace },
];

for (const { label, make } of backends) {
  describe(`key rotation with reencrypt on ${label}`, { timeout: 120_000 }, () => {
    it('after reencryptAll under k2, a process holding only k2 loads, verifies and resumes every run; before it, only k2 fails naming k1', async () => {
      const place = make(label);
      const hooks: Hooks = {};
      const open = async (encryption?: EncryptionOptions) => {
        const waypoint = await observedWaypoint(hooks, { storage: place.storage(), encryption });
        opened.push(waypoint);
        return waypoint;
      };
      try {
        // A run from before encryption was enabled, in clear text.
        const plain = await open();
        await plain.run(ObservedPipeline, { runId: 'legacy', input: { topic: 'old' } });
        await plain.close();

        // Under k1: a completed run (memories, a committed side effect), a paused one, a failed one
        // (its side effect failed: an operation error and a run error).
        const w1 = await open(K1);
        await w1.run(ObservedPipeline, { runId: 'done', input: { topic: 'a' } });
        const stop = new AbortController();
        hooks.onPause = () => stop.abort('test pause');
        assert.equal((await w1.run(ObservedPipeline, { runId: 'paused', input: { topic: 'b' }, signal: stop.signal })).status, 'paused');
        hooks.onPause = undefined;
        hooks.inEffect = () => {
          throw new Error('mail server down');
        };
        await assert.rejects(w1.run(ObservedPipeline, { runId: 'failed', input: { topic: 'c' } }));
        hooks.inEffect = undefined;
        await w1.close();

        // Only k2, before re-encrypting: the rows name the key they need.
        const early = await open(ONLY_K2);
        await assert.rejects(early.checkpoint('done'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED' && /run 'done'/.test(e.message) && /key id 'k1'/.test(e.message));
        await early.close();

        const w2 = await open(ROTATED);
        const store = w2.store as EncryptingCheckpointStore;
        await w2.checkpoint('done'); // a tiered store now holds a copy of the old rows in Redis
        const before = new Map(await Promise.all(RUNS.map(async (id) => [id, await store.loadRun(id)] as const)));
        const rawBefore = await rawPayloads(store, 'failed');
        assert.ok(
          rawBefore.every((v) => keyIdOf(v) === 'k1'),
          'the failed run is sealed under k1',
        );
        const { runs, unreadable } = await store.reencryptAll();
        assert.deepEqual(unreadable, []);
        assert.deepEqual(runs.map((r) => r.runId).sort(), [...RUNS].sort());
        for (const report of runs) {
          assert.ok(report.rewritten > 0, `${report.runId} rewritten`);
          assert.deepEqual([report.alreadyCurrent, report.skipped], [0, 0], report.runId);
        }
        const again = await store.reencryptAll();
        assert.ok(
          again.runs.every((r) => r.rewritten === 0 && r.skipped === 0 && r.alreadyCurrent > 0),
          'a second pass finds everything current',
        );
        for (const id of RUNS) {
          const raw = await rawPayloads(store, id);
          assert.ok(raw.length >= 3, `${id}: ${raw.length} payloads`);
          assert.deepEqual(new Set(raw.map(keyIdOf)), new Set(['k2']), `${id}: every stored envelope is under k2`);
        }
        assert.ok((await rawPayloads(store, 'failed')).length === rawBefore.length);
        await w2.close();

        // Only k2 from here on: k1 is retired.
        const w3 = await open(ONLY_K2);
        w3.register(ObservedPipeline);
        for (const id of RUNS) {
          const loaded = (await w3.store.loadRun(id))!;
          assert.deepEqual(loaded, before.get(id), `${id} reads as it did under k1`);
          assert.ok(loaded.steps.length > 0);
          assert.deepEqual(scanRun(loaded.run, loaded.steps, {}), [], `${id}: every digest verifies`);
          await w3.checkpoint(id);
        }
        const failed = await w3.get('failed');
        assert.equal(failed?.status, 'failed');
        assert.match(JSON.stringify(failed?.error), /mail server down/);
        const failedOps = await w3.store.listOperations('failed');
        assert.ok(
          failedOps.some((op) => op.state === 'failed' && /mail server down/.test(op.error ?? '')),
          'the failed attempt reads',
        );
        assert.ok((await w3.store.listOperations('done')).some((op) => op.state === 'committed' && op.result !== null));
        const resumed = await w3.resume('paused');
        assert.equal(resumed.status, 'completed');
        assert.equal((await w3.get('paused'))?.status, 'completed');
        assert.deepEqual(new Set((await rawPayloads(w3.store as EncryptingCheckpointStore, 'paused')).map(keyIdOf)), new Set(['k2']));
        await w3.close();
      } finally {
        await place.cleanup();
      }
    });
  });
}
