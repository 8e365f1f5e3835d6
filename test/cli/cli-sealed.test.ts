import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sqliteStorage, type WaypointOptions } from '../../src/index';
import { ObservedPipeline, observedWaypoint } from '../integrations/observability-pipeline';
import { assertExit, assertOneLineError, waypoint } from './cli-harness';

/**
 * Rows the CLI can only check with the application's keys: HMAC-sealed (WAYPOINT_HMAC_KEY or the
 * module's hmacKey) and encrypted at rest (the module's encryption keys). Without them `verify` and
 * `runs show` refuse with a usage error instead of calling every row corrupted.
 */
describe('waypoint CLI on HMAC-sealed and encrypted stores', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-cli-sealed-'));
  const hmacDb = join(dir, 'hmac.db');
  const encryptedDb = join(dir, 'encrypted.db');
  const hmacKey = 'the-hmac-key';
  const encryption = { activeKeyId: 'k1', keys: { k1: randomBytes(32).toString('base64') } };
  const keysModule = join(dir, 'keys.js');

  async function fill(path: string, options: WaypointOptions, runId = 'sealed'): Promise<void> {
    const writer = await observedWaypoint({}, { storage: sqliteStorage({ path }), ...options });
    try {
      await writer.run(ObservedPipeline, { runId, input: {} });
    } finally {
      await writer.close();
    }
  }

  before(async () => {
    await fill(hmacDb, { hmacKey });
    await fill(encryptedDb, { encryption });
    writeFileSync(keysModule, `exports.createWaypointOptions = () => (${JSON.stringify({ encryption })});\n`);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('HMAC rows: refused without a key (exit 2), intact with the right key, corrupted with a wrong one (exit 4)', async () => {
    const store = `sqlite:${hmacDb}`;
    const keyless = await waypoint(['--store', store, 'verify']);
    assertExit(keyless, 2, 'verify without the key');
    assertOneLineError(keyless, /sealed with an HMAC: set WAYPOINT_HMAC_KEY/);
    assertExit(await waypoint(['--store', store, 'verify'], { WAYPOINT_HMAC_KEY: hmacKey }), 0, 'verify with the key');
    assertExit(await waypoint(['--store', store, 'runs', 'show', 'sealed'], { WAYPOINT_HMAC_KEY: hmacKey }), 0, 'show with the key');
    const wrong = await waypoint(['--store', store, 'verify', '--json'], { WAYPOINT_HMAC_KEY: 'not-the-key' });
    assertExit(wrong, 4, 'verify with a wrong key');
    assert.ok(wrong.json<{ corrupted: { reason: string }[] }>().corrupted.every((c) => /HMAC does not match/.test(c.reason)));
  });

  it('encrypted rows: refused without the keys (exit 2), verified and shown with the module that has them', async () => {
    const store = `sqlite:${encryptedDb}`;
    const keyless = await waypoint(['--store', store, 'runs', 'show', 'sealed']);
    assertExit(keyless, 2, 'show without the keys');
    assertOneLineError(keyless, /encrypted at rest: give --module/);
    const verified = await waypoint(['--store', store, '--module', keysModule, 'verify', '--json']);
    assertExit(verified, 0, 'verify with the keys');
    assert.equal(verified.json<{ rows: number }>().rows, 4);
    assertExit(await waypoint(['--store', store, '--module', keysModule, 'runs', 'show', 'sealed']), 0, 'show with the keys');
  });

  it('a run sealed under a key the module lacks is reported as corrupted (exit 4); the other runs are still checked', async () => {
    const mixedDb = join(dir, 'mixed.db');
    await fill(mixedDb, { encryption });
    await fill(mixedDb, { encryption: { activeKeyId: 'k9', keys: { k9: randomBytes(32) } } }, 'foreign');
    const verified = await waypoint(['--store', `sqlite:${mixedDb}`, '--module', keysModule, 'verify', '--json']);
    assertExit(verified, 4, 'verify with a key missing');
    const report = verified.json<{ runs: number; rows: number; corrupted: { runId: string; reason: string }[] }>();
    assert.deepEqual([report.runs, report.rows], [2, 4]);
    assert.deepEqual(
      report.corrupted.map((c) => c.runId),
      ['foreign'],
    );
    assert.match(report.corrupted[0].reason, /key id 'k9', which is not configured/);
  });
});
