import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { DEMO_INPUT, FinancialAnalysis, exampleModule, stepKeys } from '../../examples/financial-analysis/pipeline';
import { Waypoint } from '../../src/index';
import { redisStorage } from '../../src/storage/redis/module';
import { assertExit, waypoint } from './cli-harness';

const REDIS_URL = process.env.WAYPOINT_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * The binary against the shared Redis, under a key prefix of its own (deleted afterwards; never FLUSHDB):
 * runs written by the example pipeline in this process are listed, shown and verified through
 * `redis://...?prefix=`.
 */
describe('waypoint CLI on Redis', { timeout: 60_000 }, () => {
  const prefix = `wpt-cli:${randomUUID().slice(0, 8)}:`;
  const storeUrl = `${REDIS_URL}?prefix=${encodeURIComponent(prefix)}`;
  const dir = mkdtempSync(join(tmpdir(), 'waypoint-cli-redis-'));
  const admin = new Redis(REDIS_URL);

  before(async () => {
    const writer = await Waypoint.create({
      modules: [redisStorage({ url: REDIS_URL, keyPrefix: prefix }), exampleModule({ llm: { delayMs: 0 }, outboxPath: join(dir, 'outbox.jsonl') })],
    });
    try {
      await writer.run(FinancialAnalysis, { runId: 'redis-done', input: { ...DEMO_INPUT } });
    } finally {
      await writer.close();
    }
  });

  after(async () => {
    const keys: string[] = [];
    for await (const batch of admin.scanStream({ match: `${prefix}*`, count: 500 })) keys.push(...(batch as string[]));
    if (keys.length > 0) await admin.del(...keys);
    admin.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lists, shows and verifies the runs under the prefix', async () => {
    const listed = await waypoint(['--store', storeUrl, 'runs', 'list', '--json']);
    assertExit(listed, 0, 'runs list');
    assert.deepEqual(
      listed.json<{ runId: string; status: string }[]>().map((r) => [r.runId, r.status]),
      [['redis-done', 'completed']],
    );
    const shown = await waypoint(['--store', storeUrl, 'runs', 'show', 'redis-done', '--json']);
    assertExit(shown, 0, 'runs show');
    assert.deepEqual(
      shown.json<{ timeline: { entries: { step: string }[] } }>().timeline.entries.map((e) => e.step),
      stepKeys(),
    );
    const verified = await waypoint(['--store', storeUrl, 'verify', '--json']);
    assertExit(verified, 0, 'verify');
    assert.deepEqual(((r) => [r.runs, r.rows, r.ok])(verified.json<{ runs: number; rows: number; ok: boolean }>()), [1, stepKeys().length, true]);
    const other = await waypoint(['--store', `${REDIS_URL}?prefix=${encodeURIComponent(`${prefix}other:`)}`, 'runs', 'list', '--json']);
    assert.deepEqual(other.json(), [], 'another prefix sees nothing');
  });
});
