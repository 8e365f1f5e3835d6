import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Agent, Pipeline, Step, Waypoint, sqliteStorage } from '../../src/index';
import { runIdentity, stepDigest } from '../../src/core/history/row-integrity';
import type { VerifyReport } from '../../src/cli/commands/verify';
import { assertExit, waypoint as cli } from '../cli/cli-harness';
import { openRawSqlite } from '../helpers/raw-sqlite';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { defineValuesSuite } from './values-suite';

/** The stored-values suite on SQLite: one temp file, opened again by every reader. */
defineValuesSuite(() => {
  const { file, remove } = tempSqlitePath();
  return Promise.resolve({ name: 'sqlite', modules: () => [sqliteStorage({ path: file })], dispose: () => Promise.resolve(remove()) });
});

class Once extends Agent {
  @Step() only() {
    return { value: [1] };
  }
}

@Pipeline({ name: 'values-raw', version: '1.0.0', agents: [Once] })
class RawPipeline {}

describe('a row rewritten with the raw driver, past the depth limit and resealed', () => {
  it('the CLI verify reports it (exit 4, run and sequence), and runs show fails typed, without a RangeError', async () => {
    const { file, remove } = tempSqlitePath();
    try {
      const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: file })] });
      await waypoint.run(RawPipeline, { runId: 'raw-deep', input: {} });
      const [row] = await waypoint.store.listSteps('raw-deep');
      await waypoint.close();
      // What `node --stack-size=65500` could have stored before the limit: 20,000 levels, with a digest that matches.
      const output = `{"value":${'['.repeat(20_000)}1${']'.repeat(20_000)}}`;
      const first = { identity: runIdentity({ pipelineName: 'values-raw', input: '{}' }), prev: '' };
      const { sha256: _old, ...rest } = { ...row, output };
      const raw = openRawSqlite(file);
      try {
        raw.prepare('UPDATE waypoint_steps SET output = ?, sha256 = ? WHERE run_id = ? AND sequence = 1').run(output, stepDigest(rest, {}, first), 'raw-deep');
      } finally {
        raw.close();
      }
      const verified = await cli(['--store', `sqlite:${file}`, 'verify', '--json']);
      assertExit(verified, 4, 'verify');
      const report = verified.json<VerifyReport>();
      assert.deepEqual(
        report.corrupted.map((p) => [p.runId, p.sequence, p.step]),
        [['raw-deep', 1, 'Once/only']],
      );
      assert.match(report.corrupted[0].reason, /output cannot be read back by this process .*nested deeper than 1000 levels/);
      const shown = await cli(['--store', `sqlite:${file}`, 'runs', 'show', 'raw-deep']);
      assert.notEqual(shown.code, 0);
      assert.doesNotMatch(shown.stderr + shown.stdout, /RangeError|Maximum call stack/);
    } finally {
      remove();
    }
  });
});
