import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { after, afterEach, describe, it } from 'node:test';
import type { StoredStreamEvent, Waypoint } from '../../src/index';
import { supportsStreams } from '../../src/contract/run-stream';
import { deserialize } from '../../src/core/state/value-decoder';
import { killLiveChildren, lastJsonLine, spawnNode, waitFor, waitForLine, type ChildHandle } from '../helpers/child-process';
import { dropSchema, schemaFor } from '../helpers/pg-schema';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { deleteKeysUnder } from '../lease/backends';
import { openLive, type LiveBackend, type LivePlace } from './live-output-backends';
import { expectedParts, FAST_PARTS, WRITER_PARTS } from './live-output-pipeline';

/*
 * Live output across a SIGKILL (issue 37), on every backend a second process can open: the worker is killed
 * in the middle of a step that emits 200 parts, another worker process resumes the run, and readers in
 * processes of their own follow the stream from offset 0 with the store's readEvents / waitForEvents (one
 * reconnecting every 37 events). Each reader ends with exactly what the store holds, and once retractions are
 * applied the parts are exactly those of the recorded attempts, in order, each once; offsets contiguous. And
 * a worker killed right after a step's row was appended (a fault point) had stored every part of that step.
 * Nothing is timed: generous timeouts only bound a hang.
 */
const WORKER = resolve(__dirname, 'live-output-worker.js');
const READER = resolve(__dirname, 'live-output-reader.js');

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await killLiveChildren();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
after(killLiveChildren);

/** A fresh place for one case on `backend`, removed after it. */
async function placeFor(backend: LiveBackend, testName: string): Promise<LivePlace> {
  const tag = randomUUID().slice(0, 8);
  if (backend === 'sqlite') {
    const db = tempSqlitePath();
    cleanups.push(() => Promise.resolve(db.remove()));
    return { backend, file: db.file };
  }
  const place: LivePlace = { backend };
  if (backend !== 'redis') {
    place.schema = schemaFor(`live output crash ${backend} ${testName}`);
    await dropSchema(place.schema);
    cleanups.push(() => dropSchema(place.schema!));
  }
  if (backend !== 'postgres') {
    place.prefix = `wp-test:live-crash:${tag}:`;
    cleanups.push(() => deleteKeysUnder(place.prefix!));
  }
  return place;
}

/** Parts left once retractions are applied: [step, value]. */
function visible(events: readonly StoredStreamEvent[]): [string, unknown][] {
  let kept: { step: string; attempt: number; data: string }[] = [];
  for (const event of events) {
    if (event.kind === 'part') kept.push(event);
    else if (event.kind === 'retract') kept = kept.filter((part) => part.step !== event.step || part.attempt !== event.attempt);
  }
  return kept.map((part) => [part.step, deserialize(part.data)]);
}

async function readAll(waypoint: Waypoint, runId: string): Promise<StoredStreamEvent[]> {
  const store = waypoint.store;
  assert.ok(supportsStreams(store));
  return store.readEvents(runId, 0, 10_000);
}

/** The exit's last JSON line, failing with the child's output when it did not exit cleanly. */
async function outcome<T>(child: ChildHandle): Promise<T> {
  const exit = await child.exited;
  assert.equal(exit.code, 0, `child exited ${exit.code}: ${exit.stdout}\n${exit.stderr}`);
  return lastJsonLine<T>(exit);
}

const BACKENDS: LiveBackend[] = ['sqlite', 'postgres', 'redis', 'tiered'];

for (const backend of BACKENDS) {
  describe(`live output across a SIGKILL on ${backend}`, () => {
    it('killed mid-step, resumed in another process, followed by readers in two more: the recorded attempts’ parts, in order, each once', async () => {
      const place = await placeFor(backend, 'sigkill mid-step');
      const placeArg = JSON.stringify(place);
      const runId = `live-${randomUUID().slice(0, 8)}`;
      const follower = spawnNode(READER, [placeArg, runId, '0']);
      const reconnecting = spawnNode(READER, [placeArg, runId, '0', '37']);
      await waitForLine(follower, /following/);
      await waitForLine(reconnecting, /following/);
      const observer = await openLive(place);
      try {
        const first = spawnNode(WORKER, [placeArg, runId, 'worker-a']);
        // Killed in the middle of Writer/write: some of its 200 parts stored, not all.
        await waitFor(async () => (await readAll(observer, runId)).filter((e) => e.kind === 'part' && e.step === 'Writer/write').length >= 60, {
          what: 'the writer step to have stored 60 parts',
          child: first,
        });
        await first.kill('SIGKILL');
        const before = await readAll(observer, runId);
        const cut = before.filter((e) => e.kind === 'part' && e.step === 'Writer/write').length;
        assert.ok(cut < WRITER_PARTS, `killed before the step's last part (${cut} stored)`);

        const second = spawnNode(WORKER, [placeArg, runId, 'worker-b']);
        const result = await outcome<{ status: string; stepsSkipped: number }>(second);
        assert.equal(result.status, 'completed');
        assert.equal(result.stepsSkipped, 1, 'the intro was recorded before the kill and not run again');

        const stored = await readAll(observer, runId);
        assert.deepEqual(
          stored.map((e) => e.offset),
          stored.map((_, i) => i),
          'offsets contiguous from 0',
        );
        assert.deepEqual(visible(stored), expectedParts());
        // The dead attempt is retracted before any part of the new one, and the run's end is the last event.
        const retract = stored.findIndex((e) => e.kind === 'retract' && e.step === 'Writer/write');
        assert.ok(retract > 0 && stored.slice(0, retract).filter((e) => e.kind === 'part' && e.step === 'Writer/write').length === cut);
        assert.deepEqual(
          stored.flatMap((e) => (e.kind === 'status' ? [e.status] : [])),
          ['running', 'running', 'completed'],
        );
        assert.equal(stored.at(-1)!.kind, 'status');

        for (const reader of [follower, reconnecting]) {
          const seen = await outcome<{ connections: number; events: StoredStreamEvent[] }>(reader);
          assert.deepEqual(
            seen.events.map((e) => [e.offset, e.kind]),
            stored.map((e) => [e.offset, e.kind]),
            'the reader saw every event once, in order',
          );
          assert.deepEqual(visible(seen.events.map((e) => ({ ...e, createdAt: new Date(e.createdAt) }))), expectedParts());
          if (reader === reconnecting) assert.ok(seen.connections > 3, `reconnected (${seen.connections} connections)`);
        }
      } finally {
        await observer.close();
      }
    });

    it('a worker killed right after a step’s row was appended had stored every part of that step', async () => {
      const place = await placeFor(backend, 'fault after row');
      const placeArg = JSON.stringify(place);
      const runId = `row-${randomUUID().slice(0, 8)}`;
      // The 2nd row is Writer/write's: the process dies the moment its append returns; its 70 parts were emitted at once, the last 6 still in the writer's buffer.
      const worker = spawnNode(WORKER, [placeArg, runId, 'worker-f'], { LIVE_FAST: '1', WAYPOINT_FAULT: 'after-checkpoint-before-next-step@2' });
      const exit = await worker.exited;
      assert.equal(exit.signal, 'SIGKILL', exit.stdout + exit.stderr);
      const observer = await openLive(place);
      try {
        const loaded = await observer.store.loadRun(runId);
        assert.deepEqual(
          loaded!.steps.map((row) => row.stepName),
          ['hello', 'write'],
        );
        const parts = (await readAll(observer, runId)).filter((e) => e.kind === 'part' && e.step === 'Writer/write');
        assert.equal(parts.length, FAST_PARTS, 'every part of the recorded step is stored');
      } finally {
        await observer.close();
      }
    });
  });
}
