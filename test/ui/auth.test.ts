import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { request } from 'node:http';
import { Script } from 'node:vm';
import { after, before, describe, it } from 'node:test';
import { MemoryCheckpointStore, WaypointError } from '../../src/index';
import { startUiServer, type UiServer } from '../../src/ui';
import type { RunListView } from '../../src/ui/read-api';
import { http, silentLogger, type ErrorBody } from './fixtures';

const TOKEN = 'correct-horse-battery-staple-42';

/** A GET with a hand-set Host header (fetch does not allow one). */
function getWithHost(url: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('ui server: token, sessions, host checks, configuration', () => {
  const store = new MemoryCheckpointStore();
  let open: UiServer;
  let locked: UiServer;

  before(async () => {
    await store.init();
    await store.createRun({ runId: 'r-1', pipelineName: 'p', pipelineVersion: '1', input: '{}', metadata: '{}' });
    open = await startUiServer({ store, port: 0, logger: silentLogger });
    locked = await startUiServer({ store, port: 0, token: TOKEN, logger: silentLogger });
  });

  after(async () => {
    await open?.close();
    await locked?.close();
  });

  it('serves the page, its script and style itself, under a strict CSP, with no CDN', async () => {
    const page = await http<string>(open.url, '/');
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type')!, /text\/html/);
    assert.match(page.headers.get('content-security-policy')!, /default-src 'none'; script-src 'self'/);
    assert.doesNotMatch(page.body, /https?:\/\//, 'no external URL in the page');
    const js = await http<string>(open.url, '/assets/app.js');
    assert.match(js.headers.get('content-type')!, /javascript/);
    assert.doesNotThrow(() => new Script(js.body), 'the page script parses');
    assert.doesNotMatch(js.body, /https?:\/\//);
    const css = await http(open.url, '/assets/app.css');
    assert.match(css.headers.get('content-type')!, /text\/css/);
    assert.equal((await http(open.url, '/assets/nothing.js')).status, 404);
  });

  it('with a token: the API answers 401 without it, 200 with the bearer', async () => {
    const none = await http<ErrorBody>(locked.url, '/api/runs');
    assert.deepEqual([none.status, none.body.error.code], [401, 'UNAUTHORIZED']);
    assert.match(none.headers.get('www-authenticate')!, /^Bearer/);
    const wrong = await http(locked.url, '/api/runs', { headers: { authorization: 'Bearer not-the-token-at-all' } });
    assert.equal(wrong.status, 401);
    const right = await http<RunListView>(locked.url, '/api/runs', { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(right.status, 200);
    assert.deepEqual(
      right.body.runs.map((r) => r.runId),
      ['r-1'],
    );
    const detail = await http(locked.url, '/api/runs/r-1');
    assert.equal(detail.status, 401, 'every endpoint, not only the list');
  });

  it('with a token: the page asks for it; /?token= and the form trade it for a session cookie', async () => {
    const page = await http<string>(locked.url, '/');
    assert.equal(page.status, 401);
    assert.match(page.body, /<form method="post" action="login">/);
    assert.equal((await http(locked.url, '/assets/app.css')).status, 200, 'the sign-in page can load its style');

    const viaLink = await http(locked.url, `/?token=${encodeURIComponent(TOKEN)}`);
    assert.equal(viaLink.status, 303);
    assert.equal(viaLink.headers.get('location'), '/', 'the token leaves the address bar');
    const cookie = viaLink.headers.get('set-cookie')!;
    assert.match(cookie, /HttpOnly/);
    assert.match(cookie, /SameSite=Strict/);
    assert.ok(!cookie.includes(TOKEN), 'the cookie is not the token itself');
    const withCookie = await http(locked.url, '/api/runs/r-1', { headers: { cookie: cookie.split(';')[0] } });
    assert.equal(withCookie.status, 200);

    const viaForm = await http(locked.url, '/login', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `token=${encodeURIComponent(TOKEN)}`,
    });
    assert.equal(viaForm.status, 303);
    assert.equal(viaForm.headers.get('set-cookie'), cookie);
    const badForm = await http<string>(locked.url, '/login', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'token=nope' });
    assert.equal(badForm.status, 401);
    assert.match(badForm.body, /not the right one/);
    assert.equal((await http(locked.url, '/?token=wrong-token-wrong-token')).status, 401);
    assert.equal((await http(locked.url, '/api/runs', { headers: { cookie: 'waypoint_ui_session=forged' } })).status, 401);
  });

  it('without a token, answers only to its own Host names (no DNS rebinding)', async () => {
    const port = new URL(open.url).port;
    assert.equal(await getWithHost(`${open.url}api/runs`, `127.0.0.1:${port}`), 200);
    assert.equal(await getWithHost(`${open.url}api/runs`, `localhost:${port}`), 200);
    assert.equal(await getWithHost(`${open.url}api/runs`, `evil.example:${port}`), 403);
    assert.equal(await getWithHost(`${open.url}`, 'evil.example'), 403);
  });

  it('refuses to start with options it cannot run safely', async () => {
    const config = (e: unknown) => e instanceof WaypointError && e.code === 'UI_CONFIG';
    await assert.rejects(startUiServer({ store, port: 0, host: '0.0.0.0', logger: silentLogger }), (e: WaypointError) => config(e) && /0\.0\.0\.0.*token/.test(e.message));
    await assert.rejects(startUiServer({ store, port: 0, token: 'short', logger: silentLogger }), config);
    await assert.rejects(startUiServer({ store, port: 0, allowActions: true, logger: silentLogger }), (e: WaypointError) => config(e) && /waypoint/.test(e.message));
    await assert.rejects(startUiServer({ store, port: 70_000, logger: silentLogger }), config);
    const taken = Number(new URL(open.url).port);
    await assert.rejects(startUiServer({ store, port: taken, logger: silentLogger }), (e: WaypointError) => e.code === 'UI_LISTEN_FAILED' && e.message.includes(String(taken)));
  });

  it('takes the token from WAYPOINT_UI_TOKEN, which also allows a non-loopback bind', async () => {
    const saved = process.env.WAYPOINT_UI_TOKEN;
    process.env.WAYPOINT_UI_TOKEN = TOKEN;
    try {
      const ui = await startUiServer({ store, port: 0, host: '0.0.0.0', logger: silentLogger });
      try {
        const base = ui.url.replace('0.0.0.0', '127.0.0.1');
        assert.equal((await http(base, '/api/runs')).status, 401);
        assert.equal((await http(base, '/api/runs', { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
      } finally {
        await ui.close();
      }
    } finally {
      if (saved === undefined) delete process.env.WAYPOINT_UI_TOKEN;
      else process.env.WAYPOINT_UI_TOKEN = saved;
    }
  });
});
