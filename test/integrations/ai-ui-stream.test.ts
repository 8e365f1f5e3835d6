import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { Agent, Pipeline, Step, type StepContext, type Waypoint } from '../../src/index';
import { runUIMessage, runUIMessageChunks, runUIMessageStreamResponse } from '../../src/entry/ai';
import { WaypointChatTransport } from '../../src/integrations/ai/client';
import { eachTestOnSqlite } from './ai-sqlite-each';
import { code } from './langgraph-harness';
import { Research, scenario, TURNS } from './ai-agent';

/*
 * A run's stream as the AI SDK's UI message stream (issue 38): what useChat renders is the recorded
 * answer, once, whatever attempts were retracted; the chunk at an index never changes, so a continuation
 * after Last-Event-ID k is exactly the rest; WaypointChatTransport continues a cut response without the
 * chat seeing a gap, a duplicate or an error.
 */
const ANSWER = `final answer after ${TURNS - 1} tool calls`;
let waypoint: Waypoint;
eachTestOnSqlite((w) => (waypoint = w));

async function chunksOf(runId: string, after = -1): Promise<UIMessageChunk[]> {
  const out: UIMessageChunk[] = [];
  for await (const { chunk } of runUIMessageChunks(waypoint, runId, after)) out.push(chunk);
  return out;
}

/** The message the AI SDK's own reader builds from chunks; it throws on a chunk sequence it refuses. */
async function render(chunks: UIMessageChunk[]): Promise<UIMessage> {
  const stream = new ReadableStream<UIMessageChunk>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  let last: UIMessage | undefined;
  for await (const message of readUIMessageStream({ stream, terminateOnError: true })) last = message;
  assert.ok(last);
  return last;
}

const textOf = (message: UIMessage) => message.parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('');
const toolsOf = (message: UIMessage) => message.parts.flatMap((p) => ('toolCallId' in p ? [`${p.toolCallId} ${p.state}`] : []));

describe('waypoint/ai: a run as the AI SDK UI message stream (SQLite)', () => {
  it('a streamed tool loop renders to its answer and one part per tool call, each with its output', async () => {
    assert.equal((await waypoint.run(Research, { runId: 'ui-1', input: {} })).status, 'completed');
    const chunks = await chunksOf('ui-1');
    assert.deepEqual(chunks[0], { type: 'start', messageId: 'ui-1', messageMetadata: { runId: 'ui-1' } });
    assert.equal(chunks.at(-1)!.type, 'finish');
    const message = await render(chunks);
    assert.equal(message.id, 'ui-1');
    assert.equal(textOf(message), ANSWER);
    assert.deepEqual(
      toolsOf(message),
      Array.from({ length: TURNS - 1 }, (_, i) => `call-${i + 1} output-available`),
    );
    assert.deepEqual(await runUIMessage(waypoint, 'ui-1'), message, 'runUIMessage is what the live stream renders to');
  });

  it('a retracted attempt is withdrawn on the page: the replayed answer shows once', async () => {
    scenario.failAfterLoop = true;
    await assert.rejects(waypoint.run(Research, { runId: 'ui-2', input: {} }), code('STEP_FAILED', 'stopped after the loop'));
    scenario.failAfterLoop = false;
    assert.equal((await waypoint.resume('ui-2')).status, 'completed');
    const chunks = await chunksOf('ui-2');
    assert.ok(
      chunks.some((c) => c.type === 'reset-step'),
      'the retraction reached the page',
    );
    // Without the reset the first attempt's text would be there twice.
    const before = chunks.slice(
      0,
      chunks.findIndex((c) => c.type === 'reset-step'),
    );
    assert.ok(
      before.some((c) => c.type === 'text-delta'),
      'the failed attempt had shown text',
    );
    const message = await render(chunks);
    assert.equal(textOf(message), ANSWER);
    assert.equal(new Set(toolsOf(message)).size, TURNS - 1);
    assert.equal(toolsOf(message).length, TURNS - 1);
  });

  it('the chunks after index k are always the same: a continuation is exactly the rest', async () => {
    scenario.failAfterLoop = true;
    await assert.rejects(waypoint.run(Research, { runId: 'ui-3', input: {} }));
    scenario.failAfterLoop = false;
    await waypoint.resume('ui-3');
    const all = await chunksOf('ui-3');
    for (const k of [0, 1, 7, Math.floor(all.length / 2), all.length - 2, all.length - 1]) {
      assert.deepEqual(await chunksOf('ui-3', k), all.slice(k + 1), `after ${k}`);
    }
  });

  it('the SSE response carries chunk indexes, continues after Last-Event-ID and refuses a bad one', async () => {
    await waypoint.run(Research, { runId: 'ui-4', input: {} });
    const whole = parseSse(await (await runUIMessageStreamResponse(waypoint, 'ui-4')).text());
    assert.deepEqual(
      whole.slice(0, -1).map((e) => e.id),
      whole.slice(0, -1).map((_, i) => String(i)),
    );
    assert.equal(whole.at(-1)!.data, '[DONE]');
    const response = await runUIMessageStreamResponse(waypoint, 'ui-4', { request: new Request('http://x/', { headers: { 'last-event-id': '5' } }) });
    assert.equal(response.headers.get('x-vercel-ai-ui-message-stream'), 'v1');
    assert.deepEqual(parseSse(await response.text()), whole.slice(6));
    const bad = await runUIMessageStreamResponse(waypoint, 'ui-4', { request: new Request('http://x/', { headers: { 'last-event-id': '5; drop' } }) });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { code: string } }).error.code, 'BAD_LAST_EVENT_ID');
    const missing = await runUIMessageStreamResponse(waypoint, 'no-such-run');
    assert.equal(missing.status, 404);
  });

  it('a waiting run shows the signal it waits for; a cancel ends the message with abort', async () => {
    assert.equal((await waypoint.run(Approval, { runId: 'ui-5', input: {} })).status, 'waiting');
    const waiting = await render(await storedChunks('ui-5'));
    assert.equal(textOf(waiting), 'May I refund 40 EUR?');
    assert.deepEqual(waiting.parts.at(-1), { type: 'data-waypoint-status', id: 'status', data: { status: 'waiting', signal: 'approve' } });
    await waypoint.cancel('ui-5');
    const chunks = await chunksOf('ui-5');
    assert.deepEqual(chunks.at(-1), { type: 'abort', reason: 'cancelled' });
    const cancelled = await render(chunks);
    assert.deepEqual(cancelled.parts.at(-1), { type: 'data-waypoint-status', id: 'status', data: { status: 'cancelled' } });
  });
});

class Asker extends Agent {
  @Step() ask(ctx: StepContext<Record<string, unknown>>) {
    for (const [type, delta] of [['text-start'], ['text-delta', 'May I refund '], ['text-delta', '40 EUR?'], ['text-end']])
      ctx.emit({ type, id: '0', ...(delta ? { delta } : {}) });
    return {};
  }
  @Step() async approve(ctx: StepContext<Record<string, unknown>>) {
    return { approved: await ctx.waitFor<boolean>('approve') };
  }
}
@Pipeline({ name: 'ui-approval', version: '1.0.0', agents: [Asker] })
class Approval {}

/** What a waiting run's stream holds now (it does not end by itself: the run is not over). */
async function storedChunks(runId: string): Promise<UIMessageChunk[]> {
  const out: UIMessageChunk[] = [];
  for await (const { chunk } of runUIMessageChunks(waypoint, runId, -1, { follow: false })) out.push(chunk);
  return out;
}

describe('WaypointChatTransport: a cut response goes on where it stopped', () => {
  let server: Server;
  let base = '';
  const requests: { method: string; lastEventId: string | undefined }[] = [];

  beforeEach(async () => {
    requests.length = 0;
    server = createServer((req, res) => {
      requests.push({ method: req.method!, lastEventId: req.headers['last-event-id'] as string | undefined });
      const request = new Request(`http://localhost${req.url}`, { method: req.method, headers: req.headers as Record<string, string> });
      void runUIMessageStreamResponse(waypoint, 'ui-t', { request }).then(async (response) => {
        res.writeHead(response.status, Object.fromEntries(response.headers.entries()));
        for await (const bytes of response.body!) res.write(bytes);
        res.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('the chat sees the uncut stream, chunk for chunk, after two cuts', async () => {
    await waypoint.run(Research, { runId: 'ui-t', input: {} });
    const expected = await chunksOf('ui-t');
    let cuts = 0;
    // A fetch that breaks the first two responses off after a few hundred bytes, as a dropped connection does.
    const cutting: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (cuts >= 2 || !response.body) return response;
      cuts += 1;
      return new Response(breakAfter(response.body, 300 * cuts), { status: response.status, headers: response.headers });
    };
    const transport = new WaypointChatTransport({ api: `${base}/api/chat`, fetch: cutting, reconnectDelayMs: 10 });
    const stream = await transport.sendMessages({ trigger: 'submit-message', chatId: 'c1', messageId: undefined, messages: [], abortSignal: undefined });
    const got: UIMessageChunk[] = [];
    for await (const chunk of stream) got.push(chunk);
    assert.equal(cuts, 2);
    assert.deepEqual(got, expected);
    assert.deepEqual(
      requests.map((r) => r.method),
      ['POST', 'GET', 'GET'],
    );
    assert.equal(requests[0].lastEventId, undefined);
    assert.match(requests[1].lastEventId ?? '', /^\d+$/, 'the continuation said where it stopped');
    assert.equal(textOf(await render(got)), ANSWER);
  });

  it('stop() is not retried: the aborted request ends without a reconnect', async () => {
    await waypoint.run(Research, { runId: 'ui-t', input: {} });
    const transport = new WaypointChatTransport({ api: `${base}/api/chat`, reconnectDelayMs: 10 });
    const abort = new AbortController();
    const stream = await transport.sendMessages({ trigger: 'submit-message', chatId: 'c1', messageId: undefined, messages: [], abortSignal: abort.signal });
    const reader = stream.getReader();
    await reader.read();
    abort.abort();
    await assert.rejects(async () => {
      for (;;) if ((await reader.read()).done) throw new Error('ended without the abort error');
    });
    assert.deepEqual(
      requests.map((r) => r.method),
      ['POST'],
    );
  });
});

/** `body`, erroring like a dropped connection after `bytes` bytes. */
function breakAfter(body: ReadableStream<Uint8Array>, bytes: number): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let sent = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = await reader.read();
      if (next.done) return controller.close();
      const room = bytes - sent;
      if (next.value.byteLength >= room) {
        controller.enqueue(next.value.subarray(0, room));
        await reader.cancel();
        controller.error(new TypeError('network error'));
        return;
      }
      sent += next.value.byteLength;
      controller.enqueue(next.value);
    },
  });
}

function parseSse(text: string): { id?: string; data: string }[] {
  return text
    .split('\n\n')
    .filter((block) => block.includes('data:'))
    .map((block) => {
      const id = /^id: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)![1];
      return id === undefined ? { data } : { id, data };
    });
}
