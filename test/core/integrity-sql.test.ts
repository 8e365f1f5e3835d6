import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { GzipFileArchiveSink, TOKENS, TypeOrmCheckpointStore, Waypoint, type WaypointError } from '../../src/index';
import type { TypeOrmStoreOptions } from '../../src/storage/sql/options';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { dropSchema, PG_TEST_URL, schemaFor } from '../helpers/pg-schema';
import { tempSqlitePath } from '../helpers/sqlite-temp';

/**
 * Integrity, encryption and retention against the real SQL stores: bytes flipped with SQL, keys swapped,
 * a 2,000-step run kept bounded. (The same behaviour on the memory store: integrity-memory.test.ts.)
 */

let executed: number[] = [];
const Five = syntheticPipeline({ name: 'integrity-sql', steps: 5, payloadBytes: 50, onStep: (_ctx, i) => void executed.push(i) });

interface Backend {
  name: string;
  options(): TypeOrmStoreOptions;
  /** SQL that overwrites one byte of the output of (run, sequence). */
  flip: string;
  cleanup(): Promise<void>;
}

function sqliteBackend(): Backend {
  const { file, remove } = tempSqlitePath();
  return {
    name: 'sqlite',
    options: () => ({ type: 'sqlite', path: file }),
    flip: `UPDATE waypoint_steps SET output = replace(output, 'x', 'y') WHERE run_id = ? AND sequence = ?`,
    cleanup: () => Promise.resolve(remove()),
  };
}

function postgresBackend(test: string): Backend {
  const schema = schemaFor(`integrity-sql ${test}`);
  return {
    name: 'postgres',
    options: () => ({ type: 'postgres', url: PG_TEST_URL, schema }),
    flip: `UPDATE "${schema}".waypoint_steps SET output = replace(output, 'x', 'y') WHERE run_id = $1 AND sequence = $2`,
    cleanup: () => dropSchema(schema),
  };
}

async function open(backend: Backend, extra: Parameters<typeof Waypoint.create>[0] = {}): Promise<Waypoint> {
  const store = new TypeOrmCheckpointStore(backend.options());
  const module = new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
  });
  return Waypoint.create({ ...extra, modules: [module], pipelines: [Five] });
}

const opened: Waypoint[] = [];
after(async () => {
  for (const w of opened) await w.close().catch(() => undefined);
});

const backends: { label: string; make: (test: string) => Backend }[] = [
  { label: 'sqlite', make: () => sqliteBackend() },
  { label: 'postgres', make: (test) => postgresBackend(test) },
];

for (const { label, make } of backends) {
  describe(`integrity and retention on ${label}`, () => {
    it('a byte flipped in a stored row is detected on load and named; fallback re-runs from the last valid checkpoint', async () => {
      const backend = make('flip');
      try {
        const waypoint = await open(backend);
        opened.push(waypoint);
        await waypoint.run(Five, { runId: 'r', input: {} });
        const store = waypoint.store as TypeOrmCheckpointStore;
        await store.dataSource.query(backend.flip, ['r', 4]);
        await assert.rejects(waypoint.checkpoint('r'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED' && /'r'/.test(e.message) && /sequence 4/.test(e.message));
        await store.updateRun('r', { status: 'paused' }, null);
        await assert.rejects(waypoint.resume('r'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED');
        const fallback = await open(backend, { onCorruption: 'fallback' });
        opened.push(fallback);
        executed = [];
        const result = await fallback.resume('r');
        assert.equal(result.status, 'completed');
        assert.deepEqual(executed, [3, 4]);
        assert.equal((await fallback.checkpoints('r')).length, 6, 'sequences 0..5');
      } finally {
        await backend.cleanup();
      }
    });

    it('wrong HMAC key and wrong encryption key are clear errors; the right keys read the run', async () => {
      const backend = make('keys');
      try {
        const key = randomBytes(32);
        const sealed = await open(backend, { hmacKey: 'right-key', encryption: { keys: { k1: key }, activeKeyId: 'k1' } });
        opened.push(sealed);
        await sealed.run(Five, { runId: 's', input: { secret: 'tok-123' } });
        const raw = await (sealed.store as unknown as EncryptedInner).inner.loadRun('s');
        assert.ok(raw && !raw.run.input.includes('tok-123') && raw.steps.every((s) => s.output.startsWith('wpenc:1:k1:')));
        const wrongHmac = await open(backend, { hmacKey: 'other-key', encryption: { keys: { k1: key }, activeKeyId: 'k1' } });
        opened.push(wrongHmac);
        await assert.rejects(wrongHmac.checkpoint('s'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED' && /hmacKey/.test(e.message));
        const wrongKey = await open(backend, { hmacKey: 'right-key', encryption: { keys: { k1: randomBytes(32) }, activeKeyId: 'k1' } });
        opened.push(wrongKey);
        await assert.rejects(wrongKey.checkpoint('s'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED' && /key id 'k1'/.test(e.message));
        assert.equal((await sealed.checkpoint('s')).shared_context.secret, 'tok-123');
      } finally {
        await backend.cleanup();
      }
    });

    it('retention keeps a 2,000-step run resumable and bounded, and the archive holds every folded step', async () => {
      const backend = make('retention');
      const dir = mkdtempSync(join(tmpdir(), 'wp-archive-sql-'));
      try {
        let failAt = 1200;
        const Long = syntheticPipeline({
          name: `retention-sql-${label}`,
          steps: 2000,
          payloadBytes: 10,
          onStep: (_ctx, i) => {
            if (i === failAt) throw new Error('boom');
          },
        });
        const sink = new GzipFileArchiveSink(dir);
        const waypoint = await open(backend, { retention: { keepLast: 10, compactEvery: 200, archive: sink } });
        opened.push(waypoint);
        await assert.rejects(waypoint.run(Long, { runId: 'long', input: {} }), (e: WaypointError) => e.code === 'STEP_FAILED');
        assert.ok((await waypoint.store.listSteps('long')).length <= 211);
        failAt = -1;
        const result = await waypoint.resume('long');
        assert.equal(result.status, 'completed');
        assert.equal(result.stepsSkipped, 1200);
        assert.equal(Object.keys(result.state).length, 2000);
        await waypoint.retention.compact('long');
        const rows = await waypoint.store.listSteps('long');
        assert.equal(rows.length, 11);
        assert.equal(rows[0].stepName, 'base');
        const archived = [];
        for (const entry of await sink.entries('long')) archived.push(...(await sink.read(entry)).steps);
        const sequences = new Set(archived.filter((r) => r.stepName !== 'base').map((r) => r.sequence));
        for (let seq = 1; seq <= 1990; seq++) assert.ok(sequences.has(seq), `sequence ${seq} archived`);
        assert.equal((await waypoint.run(Long, { runId: 'long' })).stepsSkipped, 2000);
      } finally {
        rmSync(dir, { recursive: true, force: true });
        await backend.cleanup();
      }
    });
  });
}

type EncryptedInner = { inner: TypeOrmCheckpointStore };
