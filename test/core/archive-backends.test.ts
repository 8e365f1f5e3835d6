import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { GzipFileArchiveSink, Waypoint, redisStorage, sqliteStorage, type RunStreamEvent, type WaypointError } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';

/**
 * Prune and restore through the archive on the SQLite and Redis stores (PostgreSQL: test/integrations/
 * s3-archive.test.ts; memory: archive-gzip.test.ts), with encryption on: the run row, every row and the
 * operations log come back, the run verifies and time-travels, and its archived rows stay sealed.
 */

let failAt = -1;
const Thirty = syntheticPipeline({
  name: 'archive-backends',
  steps: 30,
  payloadBytes: 30,
  stepsPerAgent: 10,
  onStep: (ctx, i) => {
    ctx.emit({ said: `part-secret-${i}` });
    if (i === failAt) throw new Error('boom');
  },
});

const backends: { name: string; open: () => { module: ContainerModule; cleanup: () => void } }[] = [
  {
    name: 'sqlite',
    open: () => {
      const { file, remove } = tempSqlitePath();
      return { module: sqliteStorage({ path: file }), cleanup: remove };
    },
  },
  {
    name: 'redis',
    open: () => ({
      module: redisStorage({ url: process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', keyPrefix: `wp-test:archive:${randomUUID()}:` }),
      cleanup: () => undefined,
    }),
  },
];

/** A run's stored stream, without the append times (a restore appends again). */
async function readAll(waypoint: Waypoint, runId: string): Promise<Omit<RunStreamEvent, 'createdAt'>[]> {
  const events: Omit<RunStreamEvent, 'createdAt'>[] = [];
  for await (const event of waypoint.stream(runId, { follow: false })) {
    const { createdAt: _at, ...rest } = event as RunStreamEvent & { createdAt?: Date };
    events.push(rest);
  }
  return events;
}

for (const backend of backends) {
  describe(`archive and restore on ${backend.name}`, () => {
    it('a pruned run (failed once, resumed, compacted) comes back with its run row, rows and operations', async () => {
      const dir = mkdtempSync(join(tmpdir(), `wp-archive-${backend.name}-`));
      const { module, cleanup } = backend.open();
      const sink = new GzipFileArchiveSink(dir);
      const waypoint = await Waypoint.create({
        modules: [module],
        encryption: { activeKeyId: 'k', keys: { k: randomBytes(32) } },
        hmacKey: 'archive-test',
        retention: { keepLast: 5, compactEvery: 10, archive: sink },
      });
      try {
        failAt = 12;
        await assert.rejects(waypoint.run(Thirty, { runId: 'b/1', input: { who: 'auditor' } }), (e: WaypointError) => e.code === 'STEP_FAILED');
        failAt = -1;
        assert.equal((await waypoint.resume('b/1')).status, 'completed');
        const operations = await waypoint.store.listOperations('b/1');
        assert.ok(operations.length > 0, 'the failed attempt is in the operations log');
        const latest = await waypoint.checkpoint('b/1');
        const stream = await readAll(waypoint, 'b/1');
        assert.ok(stream.some((e) => e.kind === 'retract') && stream.filter((e) => e.kind === 'part').length === 31, 'the failed attempt emitted, then was retracted');
        assert.deepEqual(await waypoint.retention.prune(new Date(Date.now() + 60_000)), ['b/1']);
        assert.equal(await waypoint.get('b/1'), null);
        const archived = readdirSync(dir, { recursive: true })
          .map(String)
          .filter((name) => name.endsWith('.json.gz'))
          .map((name) => gunzipSync(readFileSync(join(dir, name))).toString('utf8'));
        assert.ok(
          archived.some((text) => text.includes('"stream"')),
          'the prune archived the live output',
        );
        assert.ok(!archived.some((text) => text.includes('part-secret')), 'the archived parts stay sealed');

        const report = await waypoint.retention.restore('b/1');
        assert.deepEqual([report.restored, report.rows, report.fromSequence, report.toSequence], ['run', 30, 1, 30]);
        await waypoint.verify('b/1');
        const info = await waypoint.get('b/1');
        assert.equal(info?.status, 'completed');
        assert.deepEqual((await waypoint.checkpoint('b/1')).shared_context, latest.shared_context);
        assert.deepEqual((await waypoint.checkpoint('b/1', 2)).shared_context, { who: 'auditor', k0: 'x'.repeat(30), k1: 'x'.repeat(30) });
        assert.deepEqual(
          (await waypoint.store.listOperations('b/1')).map((o) => [o.operationKey, o.state, o.error]),
          operations.map((o) => [o.operationKey, o.state, o.error]),
        );
        // The live output came back at the same offsets: parts, the retraction and statuses, as a reader saw them.
        assert.deepEqual(await readAll(waypoint, 'b/1'), stream);
        assert.equal((await waypoint.run(Thirty, { runId: 'b/1' })).stepsSkipped, 30, 'the restored run is complete');
        await waypoint.store.deleteRun('b/1');
      } finally {
        await waypoint.close();
        cleanup();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
