import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Waypoint, sqliteStorage } from '../../src/index';
import type { VerifyReport } from '../../src/cli/commands/verify';
import { openRawSqlite } from '../helpers/raw-sqlite';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { assertExit, waypoint } from './cli-harness';

const Three = syntheticPipeline({ name: 'verify-all', steps: 3, payloadBytes: 8 });

/**
 * `waypoint-durable verify` reports every problem of every run whatever a row holds: a row whose digest cannot
 * even be compared (a non-ASCII character in sha256 made timingSafeEqual throw a RangeError, and verify
 * exit 1 with no report) is that run's problem, and the other runs are still checked and reported.
 */
describe('waypoint-durable verify reports everything', { timeout: 60_000 }, () => {
  it('a digest with a non-ASCII character in one run does not hide the other runs: both reported, exit 4', async () => {
    const { file, remove } = tempSqlitePath();
    try {
      const wp = await Waypoint.create({ modules: [sqliteStorage({ path: file })], pipelines: [Three] });
      for (const runId of ['a-odd-digest', 'b-flipped', 'c-intact']) await wp.run(Three, { runId, input: {} });
      await wp.close();
      const db = openRawSqlite(file);
      try {
        db.prepare(`UPDATE waypoint_steps SET sha256 = substr(sha256, 1, length(sha256) - 1) || 'é' WHERE run_id = ? AND sequence = 2`).run('a-odd-digest');
        db.prepare(`UPDATE waypoint_steps SET output = replace(output, 'x', 'y') WHERE run_id = ? AND sequence = 3`).run('b-flipped');
      } finally {
        db.close();
      }
      const json = await waypoint(['--store', `sqlite:${file}`, 'verify', '--json']);
      assertExit(json, 4, 'verify --json');
      const report = json.json<VerifyReport>();
      assert.equal(report.ok, false);
      assert.equal(report.runs, 3, 'every run was checked');
      assert.deepEqual([...new Set(report.corrupted.map((p) => p.runId))], ['a-odd-digest', 'b-flipped']);
      assert.equal(report.corrupted.find((p) => p.runId === 'b-flipped')?.sequence, 3);
      const text = await waypoint(['--store', `sqlite:${file}`, 'verify']);
      assertExit(text, 4, 'verify');
      assert.match(text.stdout, /a-odd-digest/);
      assert.match(text.stdout, /b-flipped/);
    } finally {
      remove();
    }
  });
});
