import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { after, describe, it } from 'node:test';
import type { StoredStreamEvent } from '../../src/index';
import { supportsStreams } from '../../src/contract/run-stream';
import { killLiveChildren, lastJsonLine, spawnNode, waitForLine } from '../helpers/child-process';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { openWaypoint, TURNS } from './ai-agent';

/*
 * Live output of a durableModel streamText tool loop across a SIGKILL (issue 37), on SQLite: the worker
 * dies inside the last (12th) model call, after more than a batch of parts was stored; another process resumes (the 11 recorded calls replayed, emitting their
 * recorded parts again after the retraction of the dead attempt), and a reader in a third process follows
 * the stream from offset 0. What the reader keeps once retractions are applied equals what an uncrashed run
 * shows, in order, each once; offsets are contiguous.
 */
const WORKER = path.resolve(__dirname, 'ai-worker.js');
const READER = path.resolve(__dirname, '../crash/live-output-reader.js');
const RUN = 'research-live';

after(killLiveChildren);

function visible(events: readonly StoredStreamEvent[]): string[] {
  let kept: { step: string; attempt: number; data: string }[] = [];
  for (const event of events) {
    if (event.kind === 'part') kept.push(event);
    else if (event.kind === 'retract') kept = kept.filter((part) => part.step !== event.step || part.attempt !== event.attempt);
  }
  return kept.map((part) => part.data);
}

async function storedEvents(file: string): Promise<StoredStreamEvent[]> {
  const waypoint = await openWaypoint({ kind: 'sqlite', file });
  try {
    const store = waypoint.store;
    assert.ok(supportsStreams(store));
    return await store.readEvents(RUN, 0, 10_000);
  } finally {
    await waypoint.close();
  }
}

describe('waypoint/ai live output on SQLite: SIGKILL inside a streamed tool loop', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'waypoint-ai-live-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('a reader in another process keeps exactly the parts of an uncrashed run', async () => {
    const reference = tempSqlitePath();
    const crashed = tempSqlitePath();
    try {
      const env = (file: string, log: string, extra: Record<string, string> = {}) => ({
        AI_STORE: JSON.stringify({ kind: 'sqlite', file }),
        AI_RUN_ID: RUN,
        AI_LOG: log,
        AI_STREAM: '1',
        ...extra,
      });
      const uncrashed = await spawnNode(WORKER, [], env(reference.file, path.join(dir, 'reference.log'))).exited;
      assert.equal(lastJsonLine<{ status: string }>(uncrashed).status, 'completed', uncrashed.stderr);
      const expected = visible(await storedEvents(reference.file));
      assert.ok(expected.length > 5 * TURNS, `the uncrashed run emitted its parts (${expected.length})`);

      const reader = spawnNode(READER, [JSON.stringify({ backend: 'sqlite', file: crashed.file }), RUN, '0']);
      await waitForLine(reader, /following/);
      const log = path.join(dir, 'crash.log');
      const killed = await spawnNode(WORKER, [], env(crashed.file, log, { AI_KILL_AT: 'model@12' })).exited;
      assert.equal(killed.signal, 'SIGKILL', killed.stderr);
      const resumed = await spawnNode(WORKER, [], env(crashed.file, log)).exited;
      assert.equal(lastJsonLine<{ status: string }>(resumed).status, 'completed', resumed.stderr);

      const stored = await storedEvents(crashed.file);
      assert.deepEqual(
        stored.map((e) => e.offset),
        stored.map((_, i) => i),
      );
      assert.deepEqual(visible(stored), expected);
      assert.ok(
        stored.some((e) => e.kind === 'retract'),
        'the dead attempt was retracted',
      );
      const exit = await reader.exited;
      assert.equal(exit.code, 0, exit.stdout + exit.stderr);
      const seen = lastJsonLine<{ events: StoredStreamEvent[] }>(exit).events;
      assert.deepEqual(
        seen.map((e) => [e.offset, e.kind]),
        stored.map((e) => [e.offset, e.kind]),
      );
      assert.deepEqual(visible(seen), expected);
    } finally {
      reference.remove();
      crashed.remove();
    }
  });
});
