import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { GzipFileArchiveSink, Waypoint, memoryStorage, type WaypointError } from '../../src/index';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';

describe('retention on the memory store', () => {
  it('keeps a 2,000-step run resumable with bounded rows, archiving every folded step', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wp-archive-'));
    const sink = new GzipFileArchiveSink(dir);
    let failAt = 1500;
    const Long = syntheticPipeline({
      name: 'long-retention',
      steps: 2000,
      payloadBytes: 20,
      onStep: (_ctx, i) => {
        if (i === failAt) throw new Error('boom');
      },
    });
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], retention: { keepLast: 10, compactEvery: 100, archive: sink } });
    await assert.rejects(waypoint.run(Long, { runId: 'long', input: {} }), (e: WaypointError) => e.code === 'STEP_FAILED');
    const midRows = await waypoint.store.listSteps('long');
    assert.ok(midRows.length <= 111, `rows kept while running: ${midRows.length}`);
    failAt = -1;
    const result = await waypoint.resume('long');
    assert.equal(result.status, 'completed');
    assert.equal(result.stepsSkipped, 1500);
    assert.equal(result.stepsExecuted, 500);
    assert.equal(Object.keys(result.state).length, 2000);
    await waypoint.retention.compact('long');
    const rows = await waypoint.store.listSteps('long');
    assert.equal(rows.length, 11);
    assert.equal(rows[0].stepName, 'base');
    const archived = [];
    for (const entry of await sink.entries('long')) archived.push(...(await sink.read(entry)).steps);
    const stepSequences = new Set(archived.filter((r) => r.stepName !== 'base').map((r) => r.sequence));
    for (let seq = 1; seq <= 1990; seq++) assert.ok(stepSequences.has(seq), `sequence ${seq} archived`);
    const latest = await waypoint.checkpoint('long');
    assert.equal(Object.keys(latest.shared_context).length, 2000);
    await assert.rejects(waypoint.checkpoint('long', 5), (e: WaypointError) => e.code === 'NO_SUCH_CHECKPOINT' && /archive/.test(e.message));
    const again = await waypoint.run(Long, { runId: 'long' });
    assert.equal(again.stepsSkipped, 2000);
  });
});
