import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sqliteStorage, type EncryptionOptions } from '../../src/index';
import type { ReencryptCliReport } from '../../src/cli/commands/reencrypt';
import { ObservedPipeline, observedWaypoint } from '../integrations/observability-pipeline';
import { assertExit, assertOneLineError, waypoint } from './cli-harness';

/**
 * `waypoint-durable reencrypt`: key rotation from the command line, with the keys from the module (as the
 * workers get them). The library side and the other backends: test/storage/reencryption*.test.ts.
 */
describe('waypoint-durable reencrypt', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-cli-reencrypt-'));
  const key = () => randomBytes(32).toString('base64');
  const [k0, k1, k2] = [key(), key(), key()];
  const K1: EncryptionOptions = { activeKeyId: 'k1', keys: { k1 } };
  const modules = {
    k1k2: join(dir, 'keys-k1k2.js'),
    k2: join(dir, 'keys-k2.js'),
  };

  async function fill(path: string, runs: [string, EncryptionOptions][]): Promise<void> {
    for (const [runId, encryption] of runs) {
      const writer = await observedWaypoint({}, { storage: sqliteStorage({ path }), encryption });
      try {
        await writer.run(ObservedPipeline, { runId, input: { topic: runId } });
      } finally {
        await writer.close();
      }
    }
  }

  before(() => {
    const write = (file: string, encryption: EncryptionOptions) => writeFileSync(file, `exports.createWaypointOptions = () => (${JSON.stringify({ encryption })});\n`);
    write(modules.k1k2, { activeKeyId: 'k2', keys: { k1, k2 } });
    write(modules.k2, { activeKeyId: 'k2', keys: { k2 } });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('rewrites every run under the active key, after which a module holding only that key verifies the store', async () => {
    const db = join(dir, 'rotate.db');
    await fill(db, [
      ['alpha', K1],
      ['beta', K1],
    ]);
    const store = `sqlite:${db}`;
    assertExit(await waypoint(['--store', store, '--module', modules.k2, 'verify']), 4, 'verify with only k2, before');

    const first = await waypoint(['--store', store, '--module', modules.k1k2, 'reencrypt', '--json']);
    assertExit(first, 0, 'reencrypt');
    const report = first.json<ReencryptCliReport>();
    assert.equal(report.activeKeyId, 'k2');
    assert.deepEqual(report.runs.map((r) => r.runId).sort(), ['alpha', 'beta']);
    assert.ok(
      report.runs.every((r) => r.rewritten > 0 && r.alreadyCurrent === 0 && r.skipped === 0),
      JSON.stringify(report.runs),
    );
    assert.deepEqual(report.total, { runs: 2, rewritten: report.runs[0].rewritten + report.runs[1].rewritten, alreadyCurrent: 0, skipped: 0 });
    assert.deepEqual([report.ok, report.unreadable], [true, []]);

    const verified = await waypoint(['--store', store, '--module', modules.k2, 'verify', '--json']);
    assertExit(verified, 0, 'verify with only k2, after');
    assert.equal(verified.json<{ rows: number }>().rows, 8);
    assertExit(await waypoint(['--store', store, '--module', modules.k2, 'runs', 'show', 'alpha']), 0, 'show with only k2');

    const again = await waypoint(['--store', store, '--module', modules.k1k2, 'reencrypt', 'alpha']);
    assertExit(again, 0, 'reencrypt one run again');
    assert.match(again.stdout, /^RUN\s+REWRITTEN\s+CURRENT\s+SKIPPED\nalpha\s+0\s+\d+\s+0\n/);
    assert.match(again.stdout, /Re-encrypted 1 run\(s\) in sqlite:.* under key 'k2': 0 value\(s\) rewritten, \d+ already current, 0 skipped\./);
  });

  it('refuses without encryption keys (exit 2) and names an unknown run (exit 3)', async () => {
    const db = join(dir, 'usage.db');
    await fill(db, [['alpha', K1]]);
    const keyless = await waypoint(['--store', `sqlite:${db}`, 'reencrypt']);
    assertExit(keyless, 2, 'reencrypt without --module');
    assertOneLineError(keyless, /The reencrypt command needs the encryption keys: give --module/);
    const missing = await waypoint(['--store', `sqlite:${db}`, '--module', modules.k1k2, 'reencrypt', 'alpha', 'nope']);
    assertExit(missing, 3, 'an unknown run');
    assertOneLineError(missing, /Run 'nope' is not in /);
  });

  it('a run no configured key opens: reported and left as it is, the others re-encrypted, exit 4', async () => {
    const db = join(dir, 'lost-key.db');
    await fill(db, [
      ['alpha', K1],
      ['orphan', { activeKeyId: 'k0', keys: { k0 } }],
      ['gamma', K1],
    ]);
    const run = await waypoint(['--store', `sqlite:${db}`, '--module', modules.k1k2, 'reencrypt', '--json']);
    assertExit(run, 4, 'reencrypt with a key missing');
    const report = run.json<ReencryptCliReport>();
    assert.deepEqual(report.runs.map((r) => r.runId).sort(), ['alpha', 'gamma']);
    assert.equal(report.unreadable.length, 1);
    assert.equal(report.unreadable[0].runId, 'orphan');
    assert.match(report.unreadable[0].reason, /key id 'k0', which is not configured/);
    assert.equal(report.total.runs, 3);
    assert.equal(report.ok, false);

    const human = await waypoint(['--store', `sqlite:${db}`, '--module', modules.k1k2, 'reencrypt']);
    assertExit(human, 4, 'the same, as text');
    assert.match(human.stdout, /orphan .*key id 'k0'/);
    assert.match(human.stdout, /1 run\(s\) hold values no configured key opens/);
    const verified = await waypoint(['--store', `sqlite:${db}`, '--module', modules.k2, 'verify', '--json']);
    assertExit(verified, 4, 'only the orphan fails to verify under k2');
    assert.deepEqual([...new Set(verified.json<{ corrupted: { runId: string }[] }>().corrupted.map((c) => c.runId))], ['orphan']);
  });
});
