import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import { ROWS_IN_FLIGHT } from '../../src/core/flow/rows-behind';
import { RedisCheckpointStore } from '../../src/storage/redis/redis-store';
import { killLiveChildren, lastJsonLine, spawnNode, waitFor } from '../helpers/child-process';
import { deleteKeysUnder, REDIS_TEST_URL } from '../lease/backends';

/*
 * Redis with `durability: 'async'` across a SIGKILL: rows leave in batches (one fenced script call for the
 * rows in flight), so a kill may land while a batch is on the wire or queued. Whatever the moment, the run's
 * rows are contiguous from 1, a crash loses at most the rows in flight (plus the step that was running), a
 * resume in another process runs again only the steps whose rows were lost and completes with every row.
 */
const WORKER = resolve(__dirname, 'redis-async-worker.js');
const STEPS = 2000; // long enough that the kill lands mid-run (asserted)

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  await killLiveChildren();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
after(killLiveChildren);

function ranLines(file: string): number[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
}

describe("Redis, durability 'async': SIGKILL with rows in flight", () => {
  for (const killAfter of [37, 600, 1300]) {
    it(`killed after ${killAfter} steps ran: rows contiguous, at most the rows in flight lost, resume completes`, async (t) => {
      const prefix = `wp-test:redis-async-crash:${randomUUID().slice(0, 8)}:`;
      const dir = mkdtempSync(join(tmpdir(), 'wp-redis-async-'));
      const store = new RedisCheckpointStore({ url: REDIS_TEST_URL, keyPrefix: prefix });
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      cleanups.push(async () => (await store.close(), await deleteKeysUnder(prefix)));
      const ran = join(dir, 'ran.txt');
      const env = { REDIS_PREFIX: prefix, RAN_FILE: ran, STEPS: String(STEPS) };

      const first = spawnNode(WORKER, ['r1'], env);
      await waitFor(() => ranLines(ran).length >= killAfter, { what: `${killAfter} steps run`, child: first });
      await first.kill('SIGKILL');
      const ranBefore = ranLines(ran);
      const dead = (await store.loadRun('r1'))!;
      const rows = dead.steps.length;
      assert.equal(dead.run.status, 'running', 'killed mid-run');
      assert.ok(ranBefore.length < STEPS);
      t.diagnostic(`${ranBefore.length} steps ran, ${rows} rows landed`);
      assert.deepEqual(
        dead.steps.map((s) => s.sequence),
        Array.from({ length: rows }, (_, i) => i + 1),
        'rows contiguous from 1',
      );
      assert.equal(dead.run.lastSequence, rows);
      assert.deepEqual(
        dead.steps.map((s) => s.stepName),
        Array.from({ length: rows }, (_, i) => `s${i}`),
      );
      assert.ok(rows <= ranBefore.length, `${rows} rows for ${ranBefore.length} steps run`);
      assert.ok(ranBefore.length - rows <= ROWS_IN_FLIGHT + 1, `${ranBefore.length - rows} steps ran without a row: more than the ${ROWS_IN_FLIGHT} in flight + the running one`);

      const second = spawnNode(WORKER, ['r1'], env);
      const exit = await second.exited;
      const result = lastJsonLine<{ status: string; stepsExecuted: number; resumed: boolean; error?: unknown }>(exit);
      assert.equal(result.status, 'completed', JSON.stringify(result));
      assert.equal(result.stepsExecuted, STEPS - rows, 'only the steps with no row ran again');
      const rerun = ranLines(ran).slice(ranBefore.length);
      assert.deepEqual(
        rerun,
        Array.from({ length: STEPS - rows }, (_, i) => rows + i),
        'the resume starts at the first step with no row',
      );
      const done = (await store.loadRun('r1'))!;
      assert.equal(done.run.status, 'completed');
      assert.deepEqual(
        done.steps.map((s) => s.sequence),
        Array.from({ length: STEPS }, (_, i) => i + 1),
      );
    });
  }
});
