import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { describe, it } from 'node:test';
import { Waypoint, postgresStorage, visibleParts, type RunStreamEvent } from '../../src/index';
import { createHttpHandler, toNodeListener } from '../../src/http/index';
import { killLiveChildren, spawnNode, waitFor, waitForLine } from '../helpers/child-process';
import { PG_TEST_URL, dropSchema, schemaFor } from '../helpers/pg-schema';
import { pgBossBackend } from '../queue/queue-backends';
import { authorizeByBearer, quiet } from './http-suite';
import { HttpStory, STORY_PARTS } from './http-fleet-pipeline';
import { parseSse } from './http-pipelines';

const WORKER_MAIN = resolve(__dirname, 'http-worker-main.js');

/** Reads an SSE response until `stop` says so (or it ends); returns the events and whether it ended. */
async function readEvents(response: Response, stop: (events: RunStreamEvent[]) => boolean): Promise<{ events: RunStreamEvent[]; ended: boolean }> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += value;
    const complete = text.slice(0, text.lastIndexOf('\n\n') + 2);
    const events = parseSse(complete)
      .filter((m) => m.id !== undefined)
      .map((m) => JSON.parse(m.data) as RunStreamEvent);
    if (stop(events)) {
      await reader.cancel();
      return { events, ended: false };
    }
  }
  const messages = parseSse(text);
  return { events: messages.filter((m) => m.id !== undefined).map((m) => JSON.parse(m.data) as RunStreamEvent), ended: messages.at(-1)?.event === 'end' };
}

describe('HTTP handler with a fleet on pg-boss', () => {
  it('starts runs through the queue; a client resumes the stream with Last-Event-ID after the worker is SIGKILLed mid-step', { timeout: 120_000 }, async () => {
    const schema = schemaFor('http handler: fleet on pg-boss');
    await dropSchema(schema);
    const fixture = await pgBossBackend.open('http handler: fleet on pg-boss');
    const waypoint = await Waypoint.create({ modules: [postgresStorage({ url: PG_TEST_URL, schema }), fixture.module(), quiet()] });
    const handler = createHttpHandler({ waypoint, pipelines: [HttpStory], authorize: authorizeByBearer });
    const server: Server = createServer(toNodeListener(handler));
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const auth = { authorization: 'Bearer acme-token' };
    const worker = (name: string) => spawnNode(WORKER_MAIN, [], { ...fixture.env, HTTP_PG_SCHEMA: schema, HTTP_WORKER: name });
    try {
      const body = JSON.stringify({ pipeline: 'http-story', runId: 'story-1', input: { topic: 'crash' } });
      const started = await fetch(`${base}/runs`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body });
      assert.deepEqual(await started.json(), { runId: 'story-1', status: 'paused' }, 'queued: paused until a worker takes it');
      const again = await fetch(`${base}/runs`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body });
      assert.equal(again.status, 200, 'the same start twice is one run');
      assert.equal((await waypoint.store.getRun('story-1'))?.metadata.includes('acme'), true, 'the run is stored with its tenant');

      const a = worker('A');
      await waitForLine(a, /"ready"/);
      // The client reads until worker A's attempt has sent a few parts, then its connection drops.
      const first = await readEvents(await fetch(`${base}/runs/story-1/stream`, { headers: auth }), (events) => events.filter((e) => e.kind === 'part').length >= 3);
      await a.kill('SIGKILL');
      const lastSeen = first.events.at(-1)!.offset;

      const b = worker('B');
      await waitForLine(b, /"ready"/);
      const rest = await readEvents(await fetch(`${base}/runs/story-1/stream`, { headers: { ...auth, 'last-event-id': String(lastSeen) } }), () => false);
      assert.equal(rest.ended, true, 'the stream ended with the run');
      const all = [...first.events, ...rest.events];
      assert.deepEqual(
        all.map((e) => e.offset),
        all.map((_, i) => i),
        'nothing skipped, nothing twice across the reconnect',
      );
      assert.deepEqual(
        visibleParts(all).map((p) => p.data),
        Array.from({ length: STORY_PARTS }, (_, i) => ({ worker: 'B', i })),
        "what the client shows: worker B's recorded attempt only, A's dead attempt retracted",
      );
      assert.deepEqual(all.at(-1), { ...all.at(-1), kind: 'status', status: 'completed' });
      await waitFor(async () => (await waypoint.get('story-1'))?.status === 'completed', { what: 'the run to complete', timeoutMs: 10_000 });

      // The stop button while worker B (another process) runs the step: the step's parts go on being
      // emitted, and the first append after the cancel is refused, which aborts its ctx.signal there.
      await fetch(`${base}/runs`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ pipeline: 'http-story', runId: 'story-2', input: { topic: 'stop' } }),
      });
      const before = await readEvents(await fetch(`${base}/runs/story-2/stream`, { headers: auth }), (events) => events.some((e) => e.kind === 'part'));
      const cancelled = await fetch(`${base}/runs/story-2/cancel`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' });
      assert.deepEqual(await cancelled.json(), { runId: 'story-2', status: 'cancelled' });
      await waitForLine(b, (line) => line.includes('"aborted"') && line.includes('story-2'));
      const after = await readEvents(await fetch(`${base}/runs/story-2/stream`, { headers: { ...auth, 'last-event-id': String(before.events.at(-1)!.offset) } }), () => false);
      assert.equal(after.ended, true);
      const stored = [...before.events, ...after.events];
      const end = stored.findIndex((e) => e.kind === 'status' && e.status === 'cancelled');
      assert.ok(end >= 0, 'the stream ends with cancelled');
      assert.deepEqual(stored.slice(end + 1), [], 'no part after the cancelled status');
      await b.kill('SIGTERM');
    } finally {
      await killLiveChildren();
      server.closeAllConnections(); // a stream left open by a failed assertion must not hold the close
      await new Promise((done) => server.close(done));
      await handler.settled();
      await waypoint.close();
      await fixture.dispose();
      await dropSchema(schema);
    }
  });
});
