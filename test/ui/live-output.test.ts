import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, afterEach, before, describe, it } from 'node:test';
import { Waypoint, memoryStorage, type StreamEvent } from '../../src/index';
import { startUiServer, type UiServer } from '../../src/ui';
import type { StreamEventView } from '../../src/ui/api-types';
import { leasedRun } from '../helpers/store-records';
import { http, silentLogger, type ErrorBody } from './fixtures';
import { artifactPath, openTestPage, type TestPage } from './chromium-page';

// The live output of a run on the timeline page (issue 37): GET /api/runs/:id/stream (Server-Sent
// Events) and the page's panel, over events written with the store's appendEvents.

const part = (step: string, attempt: number, value: unknown): StreamEvent => ({ kind: 'part', step, attempt, data: JSON.stringify(value) });

interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** An open SSE response, read message by message. */
async function openSse(url: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
  assert.equal(res.status, 200, await (res.status === 200 ? Promise.resolve('') : res.text()));
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let ended = false;
  return {
    /** The next message (comments and `retry:` skipped); null once the server closed the stream. */
    async next(): Promise<SseMessage | null> {
      for (;;) {
        const cut = buffer.indexOf('\n\n');
        if (cut >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const message: SseMessage = { data: '' };
          for (const line of block.split('\n')) {
            const [field, ...rest] = line.split(': ');
            if (field === 'id') message.id = rest.join(': ');
            if (field === 'event') message.event = rest.join(': ');
            if (field === 'data') message.data = rest.join(': ');
          }
          if (message.id !== undefined || message.event !== undefined || message.data !== '') return message;
          continue;
        }
        if (ended) return null;
        const chunk = await reader.read();
        if (chunk.done) ended = true;
        else buffer += chunk.value;
      }
    },
    close: () => controller.abort(),
  };
}

async function readAll(sse: Awaited<ReturnType<typeof openSse>>): Promise<SseMessage[]> {
  const all: SseMessage[] = [];
  for (let m = await sse.next(); m; m = await sse.next()) all.push(m);
  return all;
}

describe('GET /api/runs/:id/stream', () => {
  let waypoint: Waypoint;
  let ui: UiServer;
  let n = 0;

  before(async () => {
    waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    ui = await startUiServer({ store: waypoint.store, port: 0, logger: silentLogger });
  });
  after(async () => {
    await ui?.close();
    await waypoint?.close();
  });

  async function run() {
    const runId = `sse-${++n}`;
    const epoch = await leasedRun(waypoint.store, runId);
    const append = (...events: StreamEvent[]) => waypoint.store.appendEvents!(runId, events, { epoch });
    const end = async () => (await waypoint.store.updateRun(runId, { status: 'completed' }, { epoch }), await append({ kind: 'status', status: 'completed' }));
    return { runId, append, end, url: new URL(`api/runs/${encodeURIComponent(runId)}/stream`, ui.url).href };
  }

  it("sends every event with its offset as id and waypoint.stream's event as data, then 'end' once the run has ended", async () => {
    const { url, append, end } = await run();
    await append(
      { kind: 'status', status: 'running' },
      part('W/draft', 1, 'Hel'),
      { kind: 'retract', step: 'W/draft', attempt: 1 },
      part('W/draft', 2, { type: 'text-delta', text: 'Hi' }),
    );
    await end();
    const messages = await readAll(await openSse(url));
    assert.deepEqual(
      messages.map((m) => m.id ?? m.event),
      ['0', '1', '2', '3', '4', 'end'],
    );
    assert.deepEqual(JSON.parse(messages[3].data) as StreamEventView, { offset: 3, kind: 'part', step: 'W/draft', attempt: 2, data: { type: 'text-delta', text: 'Hi' } });
    assert.deepEqual(JSON.parse(messages[4].data) as StreamEventView, { offset: 4, kind: 'status', status: 'completed' });
  });

  it('?from and Last-Event-ID resume after what was seen, live, and the stream follows appends until the run ends', async () => {
    const { url, append, end } = await run();
    await append({ kind: 'status', status: 'running' }, part('W/draft', 1, 'a'), part('W/draft', 1, 'b'));
    const fromTwo = await openSse(`${url}?from=2`);
    assert.equal((await fromTwo.next())?.id, '2');
    const reconnected = await openSse(url, { 'last-event-id': '1' });
    assert.equal((await reconnected.next())?.id, '2');
    await append(part('W/draft', 1, 'c'));
    assert.equal((await fromTwo.next())?.id, '3');
    await end();
    assert.deepEqual(
      (await readAll(fromTwo)).map((m) => m.id ?? m.event),
      ['4', 'end'],
    );
    assert.deepEqual(
      (await readAll(reconnected)).map((m) => m.id ?? m.event),
      ['3', '4', 'end'],
    );
  });

  it('an unknown run is 404 RUN_NOT_FOUND, a bad offset or parameter 400 BAD_QUERY, before any event', async () => {
    const { url } = await run();
    const missing = await http<ErrorBody>(ui.url, 'api/runs/nope/stream');
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'RUN_NOT_FOUND');
    for (const bad of [`${url}?from=-1`, `${url}?from=x`, `${url}?offset=1`]) {
      const answer = await http<ErrorBody>(bad, '');
      assert.equal(answer.status, 400, bad);
      assert.equal(answer.body.error.code, 'BAD_QUERY');
    }
  });

  it('a client that goes away, and the server closing, leave no store wait behind', async () => {
    const { url } = await run();
    const store = waypoint.store;
    const wait = store.waitForEvents!.bind(store);
    let active = 0;
    store.waitForEvents = async (...args) => {
      active++;
      try {
        return await wait(...args);
      } finally {
        active--;
      }
    };
    try {
      const sse = await openSse(url);
      while (active === 0) await new Promise((r) => setTimeout(r, 5));
      sse.close();
      while (active > 0) await new Promise((r) => setTimeout(r, 5));
      const second = await openSse(url);
      while (active === 0) await new Promise((r) => setTimeout(r, 5));
      const own = await startUiServer({ store, port: 0, logger: silentLogger });
      const third = await openSse(new URL(new URL(url).pathname, own.url).href);
      while (active < 2) await new Promise((r) => setTimeout(r, 5));
      await own.close();
      assert.equal(await third.next().catch(() => null), null, 'the closed server ended its stream');
      assert.equal(active, 1, "only the first server's stream still waits");
      second.close();
      while (active > 0) await new Promise((r) => setTimeout(r, 5));
    } finally {
      store.waitForEvents = wait;
    }
  });
});

describe('the live output panel in headless Chromium', () => {
  let waypoint: Waypoint;
  let ui: UiServer;
  let browser: TestPage;

  before(async () => {
    browser = await openTestPage({ width: 1100, height: 900 });
    waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    ui = await startUiServer({ store: waypoint.store, port: 0, logger: silentLogger });
  });
  afterEach(() => assert.deepEqual(browser.errors, []));
  after(async () => {
    await browser?.close();
    await ui?.close();
    await waypoint?.close();
  });

  it('joins text live, strikes through a withdrawn attempt, shows JSON parts and statuses, and says when the run ended', async () => {
    const page = browser.page;
    const epoch = await leasedRun(waypoint.store, 'panel-run');
    const append = (...events: StreamEvent[]) => waypoint.store.appendEvents!('panel-run', events, { epoch });
    await append({ kind: 'status', status: 'running' }, part('Writer/draft', 1, 'Hel'), part('Writer/draft', 1, { type: 'text-delta', text: 'lo' }));
    await page.goto(`${ui.url}#/runs/panel-run`);
    const first = page.locator('#live-output .out-block[data-attempt="1"] .out-text');
    await page.locator('#live-output .out-block[data-attempt="1"] .out-text', { hasText: 'Hello' }).waitFor();
    assert.equal(await first.textContent(), 'Hello');
    await append(
      { kind: 'retract', step: 'Writer/draft', attempt: 1 },
      part('Writer/draft', 2, 'Good'),
      part('Writer/draft', 2, 'bye'),
      part('Writer/draft', 2, { type: 'tool-call', toolName: 'search' }),
    );
    await page.locator('#live-output .out-block[data-attempt="2"] .out-json').waitFor();
    assert.equal(await page.locator('#live-output .out-block[data-attempt="1"]').getAttribute('class'), 'out-block withdrawn');
    assert.match((await page.locator('#live-output .out-block[data-attempt="1"] .out-note').textContent()) ?? '', /withdrawn/);
    assert.equal(await page.locator('#live-output .out-block[data-attempt="2"] .out-text').textContent(), 'Goodbye');
    assert.equal(await page.locator('#live-output .out-block[data-attempt="2"] .out-json').textContent(), '{"type":"tool-call","toolName":"search"}');
    await waypoint.store.updateRun('panel-run', { status: 'completed' }, { epoch });
    await append({ kind: 'status', status: 'completed' });
    await page.locator('#live-output .out-state', { hasText: 'the run has ended' }).waitFor();
    assert.deepEqual(await page.locator('#live-output .out-status').allTextContents(), ['● running', '● completed']);
    await page.screenshot({ path: artifactPath('ui-live-output.png'), fullPage: true });
  });
});
