import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { Waypoint, memoryStorage } from '../../src/index';
import { HttpConfigError, createApprovalToken, createHttpHandler, toNodeListener, type HttpHandler } from '../../src/http/index';
import { waitFor } from '../helpers/child-process';
import { call, errorOf, quiet } from './http-suite';
import { HttpChat } from './http-pipelines';

const OWN_KEY = 'the-handlers-own-approval-key-0123456789';

describe('createHttpHandler: secure by default', () => {
  let waypoint: Waypoint;
  before(async () => {
    waypoint = await Waypoint.create({ modules: [memoryStorage(), quiet()] });
  });
  after(() => waypoint.close());

  it('refuses to be created without authorize; the opt-out must be named', () => {
    const refused = (options: unknown) =>
      assert.throws(
        () => createHttpHandler(options as never),
        (e: unknown) => e instanceof HttpConfigError && e.code === 'HTTP_CONFIG',
      );
    refused({ waypoint, pipelines: [HttpChat] });
    refused({ waypoint, pipelines: [HttpChat], authorize: true });
    refused({ waypoint, pipelines: [], authorize: 'UNSAFE_allow_all' });
    refused({ waypoint, pipelines: [HttpChat], authorize: 'UNSAFE_allow_all', approvalKey: 'short' });
    refused({ waypoint, pipelines: [HttpChat], authorize: 'UNSAFE_allow_all', basePath: 'no-slash' });
    assert.equal(typeof createHttpHandler({ waypoint, pipelines: [HttpChat], authorize: 'UNSAFE_allow_all' }), 'function');
  });

  it('an authorize that returns nothing refuses (401), and it sees the action, run and pipeline', async () => {
    const seen: unknown[] = [];
    const handler = createHttpHandler({
      waypoint,
      pipelines: [HttpChat],
      basePath: '/api',
      authorize: (_request, context) => {
        seen.push(context);
        return undefined;
      },
    });
    assert.equal(await errorOf(await call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', runId: 'x-1', input: { question: 'q' } } }), 401), 'UNAUTHORIZED');
    assert.deepEqual(seen, [{ action: 'start', runId: 'x-1', pipeline: 'http-chat' }]);
  });

  it("signs approval links with the handler's own key when given one, and serves through a Node server", async () => {
    const handler: HttpHandler = createHttpHandler({
      waypoint,
      pipelines: [HttpChat],
      authorize: 'UNSAFE_allow_all',
      approvalKey: OWN_KEY,
      allowedOrigins: ['https://app.example'],
    });
    const server = createServer(toNodeListener(handler));
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
        fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
      const started = await post('/runs', { pipeline: 'http-chat', runId: 'own-key', input: { question: 'q' } }, { origin: 'https://app.example' });
      assert.equal(started.status, 201, 'an allowed origin may start runs');
      await waitFor(async () => (await waypoint.get('own-key'))?.status === 'waiting', { what: 'the run to wait', timeoutMs: 20_000, intervalMs: 10 });
      const token = await createApprovalToken(waypoint, OWN_KEY, 'own-key', 'approval', { expiresIn: 60_000, payload: 'yes' });
      assert.equal(await errorOf(await post(`/approve/${token}`, {}, { origin: 'https://evil.example' }), 403), 'ORIGIN_REFUSED');
      const ok = await post(`/approve/${token}`, {});
      assert.equal(ok.status, 200, await ok.clone().text());
      await waitFor(async () => (await waypoint.get('own-key'))?.status === 'completed', { what: 'the approved run to complete', timeoutMs: 20_000, intervalMs: 10 });
    } finally {
      server.closeAllConnections(); // a stream left open by a failed assertion must not hold the close
      await new Promise((done) => server.close(done));
      await handler.settled();
    }
  });

  it('a token for a run id that was pruned and used again is for another run: 403, nothing delivered', async () => {
    const handler = createHttpHandler({ waypoint, pipelines: [HttpChat], authorize: 'UNSAFE_allow_all', basePath: '/api', approvalKey: OWN_KEY });
    const start = () => call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', runId: 'recycled', input: { question: 'q' } } });
    const waiting = () => waitFor(async () => (await waypoint.get('recycled'))?.status === 'waiting', { what: 'the run to wait', timeoutMs: 20_000, intervalMs: 10 });
    assert.equal((await start()).status, 201);
    await waiting();
    const token = await createApprovalToken(waypoint, OWN_KEY, 'recycled', 'approval', { expiresIn: '1h' });
    await waypoint.cancel('recycled');
    await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(await waypoint.retention.prune(new Date(Date.now() + 1_000), ['cancelled']), ['recycled']);
    assert.equal((await start()).status, 201, 'a new run under the old id');
    await waiting();
    assert.equal(await errorOf(await call(handler, 'POST', `/approve/${token}`, { body: {} }), 403), 'APPROVAL_LINK_INVALID');
    assert.equal((await waypoint.get('recycled'))?.status, 'waiting', 'nothing was delivered to the new run');
    await handler.settled();
  });

  it('keeps an idle stream open with heartbeats, and a client that goes away leaves the run as it was', async () => {
    const handler = createHttpHandler({ waypoint, pipelines: [HttpChat], authorize: 'UNSAFE_allow_all', basePath: '/api', heartbeatMs: 20 });
    await call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', runId: 'idle', input: { question: 'q' } } });
    await waitFor(async () => (await waypoint.get('idle'))?.status === 'waiting', { what: 'the run to wait', timeoutMs: 20_000, intervalMs: 10 });
    const gone = new AbortController();
    const response = await handler(new Request('http://app.test/api/runs/idle/stream', { signal: gone.signal }));
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    while (!text.includes(': keep-alive\n\n')) text += (await reader.read()).value ?? '';
    gone.abort();
    await reader.cancel();
    assert.match(text, /^retry: \d+\n\n/);
    assert.equal((await waypoint.get('idle'))?.status, 'waiting', 'the reader went away; the run did not');
    await waypoint.signal('idle', 'approval', 'late');
    await waypoint.resume('idle');
    assert.equal((await waypoint.get('idle'))?.status, 'completed');
    await handler.settled();
  });
});
