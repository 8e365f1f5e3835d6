import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, afterEach, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { Waypoint, sqliteStorage } from '../../src/index';
import { killLiveChildren, spawnNode, waitFor, waitForLine, type ChildHandle } from '../helpers/child-process';
import { TcpProxy } from '../helpers/tcp-proxy';
import { artifactPath, openTestPage, type TestPage } from './chromium-page';

/*
 * The chat example (examples/chat, issue 38) in headless Chromium, against its server in a child process:
 * a SIGKILLed server and a reloaded page, a cut connection, the stop button, and the approval link.
 * The mock model's answer is deterministic, so the page's text is compared with the exact answer.
 */
const DEMO = resolve(__dirname, '../../examples/chat/demo.js');
const BASE = 'Order A-1042 is a pair of trail shoes for 40 EUR, delivered on 2 December with one shoe torn.';
const LONG = ' ' + Array.from({ length: 150 }, (_, i) => `detail${i + 1}`).join(' ') + '.';
const ANSWER_LONG = BASE + ' Tell me if you want a refund.' + LONG;
const ANSWER_REFUND = BASE + ' A refund needs a manager, so I have asked one to approve it.';

let dir = '';
let port = 0;
let server: ChildHandle | undefined;
const pages: TestPage[] = [];

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const { port: free } = probe.address() as { port: number };
  await new Promise((r) => probe.close(r));
  return free;
}

async function startServer(): Promise<ChildHandle> {
  const child = spawnNode(DEMO, [], { WAYPOINT_CHAT_DIR: dir, WAYPOINT_CHAT_PORT: String(port), WAYPOINT_CHAT_LEASE_MS: '1500', WAYPOINT_CHAT_WORD_MS: '25' });
  await waitForLine(child, /Waypoint chat .* at http/, 30_000);
  server = child;
  return child;
}

async function open(url: string): Promise<Page> {
  const browser = await openTestPage({ width: 900, height: 760 });
  pages.push(browser);
  await browser.page.goto(url);
  return browser.page;
}

const assistantText = (page: Page) => page.locator('.msg.assistant .text').last().textContent();

async function ask(page: Page, text: string): Promise<void> {
  await page.getByLabel('Message').fill(text);
  await page.getByRole('button', { name: 'Send' }).click();
}

/** Waits until the page's last answer has `min` characters (it is streaming). */
async function streamed(page: Page, min: number): Promise<void> {
  await waitFor(async () => ((await assistantText(page).catch(() => '')) ?? '').length >= min, { what: `an answer of ${min} characters`, timeoutMs: 20_000, intervalMs: 20 });
}

async function runStatus(page: Page, runId: string): Promise<string> {
  return page.evaluate(async (id) => {
    const response = await fetch(`/api/waypoint/runs/${encodeURIComponent(id)}`);
    return ((await response.json()) as { status: string }).status;
  }, runId);
}

const lastRunId = async (page: Page) => (await page.locator('.msg.assistant').last().getAttribute('data-id'))!;

describe('examples/chat in headless Chromium', () => {
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'waypoint-chat-'));
    port = await freePort();
    await startServer();
  });
  afterEach(async () => {
    for (const page of pages.splice(0)) {
      assert.deepEqual(
        page.errors.filter((e) => !/Failed to load resource|ERR_CONNECTION|network/i.test(e)),
        [],
        'no script errors on the page',
      );
      await page.close();
    }
    if (!server || server.exitedYet()) await startServer();
  });
  after(async () => {
    await server?.kill('SIGTERM').catch(() => undefined);
    await killLiveChildren();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a server SIGKILLed mid-answer and a reloaded page: the answer completes once, as recorded', async () => {
    const page = await open(`http://127.0.0.1:${port}/?chat=killed`);
    await ask(page, 'Tell me about my order (the long version)');
    await streamed(page, 200);
    await server!.kill('SIGKILL');
    await startServer();
    await page.reload();
    await waitFor(async () => (await assistantText(page).catch(() => '')) === ANSWER_LONG, { what: 'the whole answer after the reload', timeoutMs: 30_000, intervalMs: 50 });
    const runId = await lastRunId(page);
    await waitFor(async () => (await runStatus(page, runId)) === 'completed', { what: 'the run completed', timeoutMs: 10_000, intervalMs: 50 });
    await page.getByRole('button', { name: 'Send' }).waitFor();
    const recorded = await page.evaluate(
      async () => (await (await fetch('/api/chat/killed/history')).json()) as { messages: { role: string; parts: { type: string; text?: string }[] }[] },
    );
    const answers = recorded.messages.filter((m) => m.role === 'assistant');
    assert.equal(answers.length, 1);
    assert.equal(answers[0].parts.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join(''), ANSWER_LONG, 'the recorded text is the one shown');
    assert.equal(await page.locator('.msg.assistant').count(), 1, 'one answer, not two');
    await page.screenshot({ path: artifactPath('chat-resumed.png') });
  });

  it('a connection cut mid-stream comes back: no gap, nothing twice, no error shown', async () => {
    const proxy = await TcpProxy.start({ port });
    try {
      const page = await open(`http://127.0.0.1:${proxy.port}/?chat=cut`);
      await ask(page, 'Tell me about my order (the long version)');
      await streamed(page, 150);
      proxy.cut();
      proxy.restore();
      await streamed(page, 600);
      proxy.cut();
      proxy.restore();
      await waitFor(async () => (await assistantText(page).catch(() => '')) === ANSWER_LONG, { what: 'the whole answer after two cuts', timeoutMs: 30_000, intervalMs: 50 });
      assert.ok(proxy.connections >= 3, 'the page connected again after each cut');
      assert.equal(await page.locator('.err').count(), 0, 'no error shown');
    } finally {
      await proxy.close();
    }
  });

  it('the stop button cancels the run within a second; the model sees its abort; nothing follows', async (t) => {
    const page = await open(`http://127.0.0.1:${port}/?chat=stopped`);
    await ask(page, 'Tell me about my order (the long version)');
    await streamed(page, 120);
    const runId = await lastRunId(page);
    const aborts = server!.stdout().split('MODEL ABORTED').length;
    const pressed = performance.now();
    await page.getByRole('button', { name: 'Stop' }).click();
    await waitFor(async () => (await runStatus(page, runId)) === 'cancelled', { what: 'the run cancelled', timeoutMs: 5_000, intervalMs: 20 });
    const took = performance.now() - pressed;
    t.diagnostic(`cancelled ${Math.round(took)} ms after the click (load ${loadavg()[0].toFixed(1)})`);
    assert.ok(took < 1_000, `cancelled ${Math.round(took)} ms after the click`);
    await waitFor(() => server!.stdout().split('MODEL ABORTED').length > aborts, { what: 'the mock model saw its abort signal', timeoutMs: 2_000 });
    await page.getByText('Stopped.').waitFor();
    const atStop = await assistantText(page);
    await new Promise((r) => setTimeout(r, 800));
    assert.equal(await assistantText(page), atStop, 'no part after the stop');
    assert.ok(ANSWER_LONG.startsWith(atStop ?? '') && (atStop ?? '').length < ANSWER_LONG.length, 'a prefix of the answer, cut short');
    await page.getByRole('button', { name: 'Send' }).waitFor();
  });

  it('an approval link opened in another browser continues the run; tampered, expired and reused links deliver nothing', async () => {
    const page = await open(`http://127.0.0.1:${port}/?chat=refund`);
    const linksBefore = server!.stdout().split('APPROVAL LINK').length - 1;
    await ask(page, 'I want a refund for order A-1042');
    await page.getByText('Waiting for a manager').waitFor();
    assert.equal(await assistantText(page), ANSWER_REFUND);
    await waitFor(() => server!.stdout().split('APPROVAL LINK').length - 1 > linksBefore, { what: 'the approval email' });
    const link = /APPROVAL LINK (\S+)/g.exec(
      server!
        .stdout()
        .split('\n')
        .filter((l) => l.startsWith('APPROVAL LINK'))
        .at(-1)!,
    )![1];
    const runId = await lastRunId(page);

    const tampered = link.slice(0, -3) + (link.endsWith('A') ? 'BBB' : 'AAA');
    assert.match(await approve(tampered), /Not delivered \(403/);
    assert.equal(await runStatus(page, runId), 'waiting', 'a tampered link delivers nothing');
    assert.match(await approve(await expiredLink(runId)), /Not delivered \(410/);
    assert.equal(await runStatus(page, runId), 'waiting', 'an expired link delivers nothing');

    assert.match(await approve(link), /Approved/);
    await page.getByText(/refund R-\S+ of 40 EUR is on its way/).waitFor({ timeout: 20_000 });
    assert.equal(await runStatus(page, runId), 'completed');
    assert.match(await approve(link), /Not delivered \(410/, 'a reused link delivers nothing');
    await page.screenshot({ path: artifactPath('chat-approved.png') });
  });
});

/** Opens `link` in a fresh browser (no session cookie), presses Approve and returns what the page says. */
async function approve(link: string): Promise<string> {
  const page = await open(link);
  await page.getByRole('button', { name: 'Approve the refund' }).click();
  await page.locator('#result:not(:empty)').waitFor();
  return (await page.locator('#result').textContent()) ?? '';
}

/** A link for the same run and signal that expired a moment ago, signed with the server's key (read from its data directory). */
async function expiredLink(runId: string): Promise<string> {
  const key = Buffer.from(readFileSync(join(dir, 'signing.key'), 'utf8'), 'hex');
  const waypoint = await Waypoint.create({ modules: [sqliteStorage({ path: join(dir, 'chat.db') })], hmacKey: key });
  try {
    const token = await waypoint.approvalLink(runId, 'approve', { expiresIn: 1, payload: { approved: true } });
    await new Promise((r) => setTimeout(r, 1_500));
    return `http://127.0.0.1:${port}/approve#${token}`;
  } finally {
    await waypoint.close();
  }
}
