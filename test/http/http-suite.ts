import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { JsonLogger, TOKENS, Waypoint } from '../../src/index';
import { createApprovalToken, createHttpHandler, type Authorize, type HttpHandler } from '../../src/http/index';
import { waitFor } from '../helpers/child-process';
import { ChatState, HttpChat, HttpHold, holdProbe, parseSse } from './http-pipelines';

/** A store for one suite: its container modules and how to remove it afterwards. */
export interface SuiteStore {
  modules: () => ContainerModule[];
  dispose: () => Promise<void>;
}

export const HMAC_KEY = 'http-suite-hmac-key-0123456789abcdef';
const BASE = 'http://app.test/api';
export const quiet = () => new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(new JsonLogger('error')));

/** Bearer tokens of the suite's two accounts; anything else is refused. */
export const authorizeByBearer: Authorize = (request) => {
  const auth = request.headers.get('authorization');
  if (auth === 'Bearer acme-token') return { tenant: 'acme' };
  if (auth === 'Bearer globex-token') return { tenant: 'globex' };
  return false;
};

export function call(handler: HttpHandler, method: string, path: string, options: { body?: unknown; as?: string; headers?: Record<string, string> } = {}): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${options.as ?? 'acme'}-token`, ...options.headers };
  if (options.body !== undefined && headers['content-type'] === undefined) headers['content-type'] = 'application/json';
  const body = options.body === undefined ? undefined : typeof options.body === 'string' ? options.body : JSON.stringify(options.body);
  return handler(new Request(`${BASE}${path}`, { method, headers, body }));
}

export async function errorOf(response: Response, status: number): Promise<string> {
  const text = await response.text();
  assert.equal(response.status, status, text);
  return (JSON.parse(text) as { error: { code: string } }).error.code;
}

/** Every route of the handler on one store. */
export function httpSuite(label: string, open: () => Promise<SuiteStore>): void {
  describe(`HTTP handler on ${label}`, { timeout: 120_000 }, () => {
    let store: SuiteStore;
    let waypoint: Waypoint;
    let handler: HttpHandler;
    before(async () => {
      store = await open();
      waypoint = await Waypoint.create({ modules: [...store.modules(), quiet()], hmacKey: HMAC_KEY, maxSignalPayloadBytes: 32_000, leaseTtlMs: 600_000, heartbeatMs: 200_000 });
      handler = createHttpHandler({
        waypoint,
        basePath: '/api',
        authorize: authorizeByBearer,
        pipelines: [{ pipeline: HttpChat, clientView: (state) => ({ answer: (state as unknown as ChatState).answer ?? null }) }, HttpHold],
      });
    });
    after(async () => {
      await handler.settled();
      await waypoint.close();
      await store.dispose();
    });

    const status = async (runId: string) => ((await (await call(handler, 'GET', `/runs/${runId}`)).json()) as { status: string }).status;

    it('starts a run at once, reads it with only the client view, and is idempotent on runId', async () => {
      const started = await call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', runId: 'chat-1', input: { question: 'hello there' } } });
      assert.equal(started.status, 201, await started.clone().text());
      assert.deepEqual(Object.keys((await started.json()) as object).sort(), ['runId', 'status']);
      await waitFor(async () => (await status('chat-1')) === 'waiting', { what: 'the run to wait for approval', timeoutMs: 30_000, intervalMs: 20 });
      const read = (await (await call(handler, 'GET', '/runs/chat-1')).json()) as Record<string, unknown>;
      assert.deepEqual(read.waitingFor, ['approval']);
      assert.deepEqual(read.view, { answer: 'echo: hello there' });
      assert.equal(JSON.stringify(read).includes('secret-trace-123'), false, 'state outside the client view never leaves the server');
      const again = await call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', runId: 'chat-1', input: { question: 'hello there' } } });
      assert.equal(again.status, 200);
      assert.deepEqual(await again.json(), { runId: 'chat-1', status: 'waiting' });
      const other = await call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', runId: 'chat-1', input: { question: 'something else' } } });
      assert.equal(await errorOf(other, 409), 'INPUT_MISMATCH');
      const fresh = (await (await call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', input: { question: 'q' } } })).json()) as { runId: string };
      assert.match(fresh.runId, /^[0-9a-f-]{36}$/, 'a run id is chosen when none is given');
    });

    it('streams the run as SSE with offsets as ids, resumes after Last-Event-ID and ?from=, and ends when the run ends', async () => {
      await call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', runId: 'chat-sse', input: { question: 'a b c' } } });
      await waitFor(async () => (await status('chat-sse')) === 'waiting', { what: 'the run to wait', timeoutMs: 30_000, intervalMs: 20 });
      const signalled = await call(handler, 'POST', '/runs/chat-sse/signals/approval', { body: { payload: { ok: true } } });
      assert.deepEqual(await signalled.json(), { runId: 'chat-sse', signal: 'approval', delivered: true });
      const whole = parseSse(await (await call(handler, 'GET', '/runs/chat-sse/stream')).text());
      assert.equal(whole.at(-1)?.event, 'end', 'the stream ends once the run completed');
      const events = whole.filter((m) => m.id !== undefined).map((m) => JSON.parse(m.data) as { offset: number; kind: string; data?: unknown; status?: string });
      assert.deepEqual(
        events.map((e) => e.offset),
        events.map((_, i) => i),
      );
      assert.deepEqual(
        whole.filter((m) => m.id !== undefined).map((m) => Number(m.id)),
        events.map((e) => e.offset),
        'id: is the offset',
      );
      assert.deepEqual(
        events.filter((e) => e.kind === 'part').map((e) => e.data),
        ['echo:', 'a', 'b', 'c'].map((text) => ({ text })),
      );
      assert.equal(events.at(-1)?.status, 'completed');
      const resumed = parseSse(await (await call(handler, 'GET', '/runs/chat-sse/stream', { headers: { 'last-event-id': '2' } })).text());
      assert.deepEqual(
        resumed.filter((m) => m.id !== undefined).map((m) => Number(m.id)),
        events.slice(3).map((e) => e.offset),
        'Last-Event-ID: nothing skipped, nothing twice',
      );
      const from = parseSse(await (await call(handler, 'GET', '/runs/chat-sse/stream?from=4')).text());
      assert.equal(Number(from.find((m) => m.id !== undefined)?.id), 4);
      const read = (await (await call(handler, 'GET', '/runs/chat-sse')).json()) as Record<string, unknown>;
      assert.deepEqual(read.result, { answer: 'echo: a b c' }, 'the result a client may see');
      assert.equal(await errorOf(await call(handler, 'GET', '/runs/chat-sse/stream?from=x'), 400), 'BAD_QUERY');
    });

    it('refuses requests without credentials (401) and hides another tenant’s run (404)', async () => {
      await call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', runId: 'chat-acme', input: { question: 'mine' } } });
      for (const [method, path] of [
        ['GET', '/runs/chat-acme'],
        ['GET', '/runs/chat-acme/stream'],
        ['POST', '/runs/chat-acme/cancel'],
        ['POST', '/runs/chat-acme/signals/approval'],
        ['POST', '/runs'],
      ]) {
        const response = await handler(new Request(`${BASE}${path}`, { method, headers: { 'content-type': 'application/json' }, body: method === 'POST' ? '{}' : undefined }));
        assert.equal(await errorOf(response, 401), 'UNAUTHORIZED', `${method} ${path}`);
      }
      for (const [method, path] of [
        ['GET', '/runs/chat-acme'],
        ['GET', '/runs/chat-acme/stream'],
        ['POST', '/runs/chat-acme/cancel'],
        ['POST', '/runs/chat-acme/signals/approval'],
      ]) {
        const response = await call(handler, method, path, { as: 'globex', body: method === 'POST' ? {} : undefined });
        assert.equal(await errorOf(response, 404), 'RUN_NOT_FOUND', `${method} ${path} as another tenant`);
      }
      const missing = await call(handler, 'GET', '/runs/no-such-run', { as: 'globex' });
      assert.equal(await errorOf(missing, 404), 'RUN_NOT_FOUND', 'the same answer as for a run that does not exist');
      const taken = await call(handler, 'POST', '/runs', { as: 'globex', body: { pipeline: 'http-chat', runId: 'chat-acme', input: { question: 'mine' } } });
      assert.equal(await errorOf(taken, 409), 'RUN_ID_TAKEN');
      assert.equal((await status('chat-acme')) !== undefined, true);
    });

    it('answers bad bodies, names, sizes, origins and routes with typed errors', async () => {
      const post = (path: string, body: unknown, headers: Record<string, string> = {}) => call(handler, 'POST', path, { body, headers });
      assert.equal(await errorOf(await post('/runs', '{not json'), 400), 'BAD_BODY');
      assert.equal(await errorOf(await post('/runs', [1]), 400), 'BAD_BODY');
      assert.equal(await errorOf(await post('/runs', { pipeline: 'http-chat', extra: 1 }), 400), 'BAD_BODY');
      assert.equal(await errorOf(await post('/runs', { pipeline: 'nope', input: {} }), 400), 'UNKNOWN_PIPELINE');
      assert.equal(await errorOf(await post('/runs', { pipeline: 'http-chat', runId: ' padded', input: { question: 'q' } }), 400), 'INVALID_RUN_ID');
      assert.equal(await errorOf(await post('/runs', { pipeline: 'http-chat', input: { question: 42 } }), 400), 'INVALID_STATE');
      assert.equal(await errorOf(await post('/runs', { pipeline: 'http-chat' }, { 'content-type': 'text/plain' }), 415), 'UNSUPPORTED_MEDIA_TYPE');
      assert.equal(await errorOf(await post('/runs', { pipeline: 'http-chat', input: { question: 'x'.repeat(70_000) } }), 413), 'PAYLOAD_TOO_LARGE');
      assert.equal(await errorOf(await post('/runs', { pipeline: 'http-chat', input: {} }, { origin: 'https://evil.test' }), 403), 'ORIGIN_REFUSED');
      await post('/runs', { pipeline: 'http-chat', runId: 'chat-bad', input: { question: 'q' } });
      assert.equal(await errorOf(await post('/runs/chat-bad/signals/%0Abad', {}), 400), 'INVALID_SIGNAL_NAME');
      assert.equal(await errorOf(await post('/runs/chat-bad/signals/approval', { payload: 'x'.repeat(40_000) }), 413), 'SIGNAL_PAYLOAD_TOO_LARGE');
      assert.equal(await errorOf(await post('/runs/chat-bad/signals/approval', { payload: 'x'.repeat(70_000) }), 413), 'PAYLOAD_TOO_LARGE');
      assert.equal(await errorOf(await post('/runs/chat-bad/signals/approval', { other: 1 }), 400), 'BAD_BODY');
      assert.equal(await errorOf(await call(handler, 'DELETE', '/runs/chat-bad'), 405), 'METHOD_NOT_ALLOWED');
      assert.equal(await errorOf(await call(handler, 'GET', '/elsewhere'), 404), 'ROUTE_NOT_FOUND');
      assert.equal(await errorOf(await call(handler, 'GET', '/runs/%E0%A4%A'), 400), 'INVALID_RUN_ID');
    });

    it('cancel aborts the running step’s ctx.signal in this process and the stream ends with cancelled', async () => {
      holdProbe.abortedWith = null;
      const started = new Promise<void>((resolve) => (holdProbe.started = resolve));
      await call(handler, 'POST', '/runs', { body: { pipeline: 'http-hold', runId: 'hold-1', input: {} } });
      await started;
      // Its part is stored before the cancel, so no refused append of it can be what stops the step.
      for await (const event of waypoint.stream('hold-1')) if (event.kind === 'part') break;
      const stream = call(handler, 'GET', '/runs/hold-1/stream').then((r) => r.text());
      const cancelled = await call(handler, 'POST', '/runs/hold-1/cancel', { body: {} });
      assert.deepEqual(await cancelled.json(), { runId: 'hold-1', status: 'cancelled' });
      // No heartbeat falls in this test (heartbeatMs 200 s): the lease check the cancel asks for does it.
      await waitFor(() => holdProbe.abortedWith !== null, { what: "the step's ctx.signal to abort", timeoutMs: 20_000, intervalMs: 10 });
      const events = parseSse(await stream)
        .filter((m) => m.id !== undefined)
        .map((m) => JSON.parse(m.data) as { kind: string; status?: string });
      assert.deepEqual(events.at(-1), { ...events.at(-1), kind: 'status', status: 'cancelled' });
      const again = await call(handler, 'POST', '/runs/hold-1/cancel', { body: {} });
      assert.deepEqual(await again.json(), { runId: 'hold-1', status: 'cancelled' }, 'a second press of the stop button changes nothing');
    });

    it('approval links: delivered once; tampered, other-key and other-run tokens 403, expired and reused 410', async () => {
      await call(handler, 'POST', '/runs', { body: { pipeline: 'http-chat', runId: 'chat-approve', input: { question: 'ok?' } } });
      await waitFor(async () => (await status('chat-approve')) === 'waiting', { what: 'the run to wait', timeoutMs: 30_000, intervalMs: 20 });
      const token = await waypoint.approvalLink('chat-approve', 'approval', { expiresIn: '1h', payload: { approved: true } });
      const approve = (t: string) => call(handler, 'POST', `/approve/${t}`, { body: {} });
      const [body, mac] = token.split('.');
      const forged = Buffer.from(JSON.stringify({ ...(JSON.parse(Buffer.from(body, 'base64url').toString()) as object), p: { approved: false } })).toString('base64url');
      assert.equal(await errorOf(await approve(`${forged}.${mac}`), 403), 'APPROVAL_LINK_INVALID', 'tampered payload');
      assert.equal(await errorOf(await approve(`${body}.${mac.slice(0, -2)}xx`), 403), 'APPROVAL_LINK_INVALID', 'tampered signature');
      const otherKey = await createApprovalToken(waypoint, 'another-key-another-key-another-key!', 'chat-approve', 'approval', { expiresIn: '1h' });
      assert.equal(await errorOf(await approve(otherKey), 403), 'APPROVAL_LINK_INVALID', 'signed with another key');
      const otherRun = await waypoint.approvalLink('chat-acme', 'approval', { expiresIn: '1h' });
      const swapped = Buffer.from(JSON.stringify({ ...(JSON.parse(Buffer.from(otherRun.split('.')[0], 'base64url').toString()) as object), r: 'chat-approve' })).toString(
        'base64url',
      );
      assert.equal(await errorOf(await approve(`${swapped}.${otherRun.split('.')[1]}`), 403), 'APPROVAL_LINK_INVALID', "another run's token pointed at this run");
      const expired = await waypoint.approvalLink('chat-approve', 'approval', { expiresIn: 1 });
      await new Promise((r) => setTimeout(r, 1100));
      assert.equal(await errorOf(await approve(expired), 410), 'APPROVAL_LINK_EXPIRED');
      assert.equal(await status('chat-approve'), 'waiting', 'nothing was delivered by the refused tokens');
      const ok = await approve(token);
      assert.deepEqual(await ok.json(), { runId: 'chat-approve', signal: 'approval', delivered: true });
      assert.equal(await errorOf(await approve(token), 410), 'APPROVAL_LINK_USED', 'a second use');
      await waitFor(async () => (await status('chat-approve')) === 'completed', { what: 'the approved run to complete', timeoutMs: 30_000, intervalMs: 20 });
      const checkpoint = await waypoint.checkpoint('chat-approve');
      assert.deepEqual(checkpoint.shared_context.decision, { approved: true }, 'the payload signed into the link');
    });
  });
}
