import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { Waypoint } from '../../src/index';
import { startUiServer, type UiServer } from '../../src/ui';
import { FinancialAnalysis, exampleModule, stepKeys } from '../../examples/financial-analysis/pipeline';
import { killLiveChildren } from '../helpers/child-process';
import { crashAndResume, openSqlite, runWorker, silentLogger, type UiDatabase } from './fixtures';
import { artifactPath, openTestPage, type TestPage } from './chromium-page';

const KEYS = stepKeys();
const CRASH_AFTER = 4;
/** A slower fake LLM than the API tests use, so the bars in the screenshot have some length. */
const LLM_DELAY = { WAYPOINT_LLM_DELAY_MS: '40' };

/** The DOM slice the page-side callbacks use (the repo compiles without the DOM lib); they run in the page, so only casts, no helpers. */
interface El {
  getAttribute(name: string): string | null;
  readonly textContent: string | null;
  readonly firstChild: El | null;
  readonly classList: { contains(name: string): boolean };
  querySelectorAll(selector: string): ArrayLike<El>;
}

describe("ui in headless Chromium: runs list, the resumed run's timeline, time travel", () => {
  let db: UiDatabase;
  let reader: Waypoint;
  let ui: UiServer;
  let browser: TestPage;
  let page: Page;

  before(async () => {
    browser = await openTestPage({ width: 1280, height: 860 });
    page = browser.page;
    db = await openSqlite();
    await runWorker(db, 'q3-msft', LLM_DELAY);
    await crashAndResume(db, 'q3-aapl', CRASH_AFTER, LLM_DELAY);
    reader = await Waypoint.create({ modules: [db.storage()] });
    ui = await startUiServer({ store: reader.store, pipelines: [FinancialAnalysis], port: 0, logger: silentLogger });
  });

  after(async () => {
    await browser?.close();
    await killLiveChildren();
    await ui?.close();
    await reader?.close();
    await db?.dispose();
  });

  it('lists both runs with status, pipeline and progress', async () => {
    await page.goto(ui.url);
    await page.locator('table.runs tbody tr').nth(1).waitFor();
    const rows = await page
      .locator('table.runs tbody tr')
      .evaluateAll((trs) =>
        (trs as unknown as El[]).map((tr) => ({ id: tr.getAttribute('data-run-id'), cells: Array.from(tr.querySelectorAll('td')).map((td) => (td.textContent ?? '').trim()) })),
      );
    assert.deepEqual(rows.map((r) => r.id).sort(), ['q3-aapl', 'q3-msft']);
    for (const row of rows) {
      assert.equal(row.cells[1], 'completed');
      assert.match(row.cells[2], /financial-analysis\s*@2\.1\.0/);
      assert.equal(row.cells[3], `${KEYS.length} / ${KEYS.length}`);
    }
    await page.selectOption('#filter-status', 'failed');
    await page.getByText('No runs match these filters.').waitFor();
    await page.selectOption('#filter-status', 'completed');
    await page.locator('table.runs tbody tr').nth(1).waitFor();
  });

  it('opens the resumed run: restored steps, executed steps, the resume point between them', async () => {
    await page.locator('a.run-link', { hasText: 'q3-aapl' }).click();
    await page
      .locator('#timeline .bar')
      .nth(KEYS.length - 1)
      .waitFor();
    const bars = await page
      .locator('#timeline .bar')
      .evaluateAll((list) => (list as unknown as El[]).map((el) => [Number(el.getAttribute('data-seq')), el.getAttribute('data-kind')]));
    assert.deepEqual(
      bars.sort((a, b) => (a[0] as number) - (b[0] as number)),
      KEYS.map((_, i) => [i + 1, i < CRASH_AFTER ? 'restored' : 'executed']),
    );
    const flag = page.locator('#timeline [data-resume-session="2"]');
    assert.match((await flag.textContent()) ?? '', /resumed · session 2 · after \d/);
    // The resume line sits between the last restored bar and the first executed one.
    const box = async (selector: string) => (await page.locator(selector).boundingBox())!;
    const lastRestored = await box(`#timeline .bar[data-seq="${CRASH_AFTER}"]`);
    const firstExecuted = await box(`#timeline .bar[data-seq="${CRASH_AFTER + 1}"]`);
    const line = await box('#timeline .resume-line');
    assert.ok(lastRestored.x + lastRestored.width <= line.x + 1 && line.x <= firstExecuted.x + 1, `resume line at x=${line.x}`);

    const stepRows = page.locator('#steps tbody tr[data-seq]');
    assert.equal(await stepRows.count(), KEYS.length);
    assert.match((await page.locator('#steps .resume-row').textContent()) ?? '', new RegExp(`session 2 started at ${KEYS[CRASH_AFTER]}`));
    assert.match((await page.locator('#integrity').textContent()) ?? '', /Integrity verified: 11 checkpoint rows/);
    assert.match((await page.locator('#operations').textContent()) ?? '', /send-report.*committed/);
    assert.equal(await page.locator('.actions button').count(), 0, 'no action buttons unless actions are allowed');

    await page.evaluate('window.scrollTo(0, 0)');
    const header = await box('#run-header');
    const timeline = await box('#timeline');
    await page.setViewportSize({ width: 1280, height: Math.ceil(timeline.y + timeline.height + 24) });
    const shot = artifactPath('ui-timeline.png');
    await page.screenshot({ path: shot, clip: { x: 0, y: 0, width: 1280, height: Math.ceil(timeline.y + timeline.height + 16) } });
    assert.ok(existsSync(shot));
    assert.ok(header.y < timeline.y);
  });

  it('time travel: picking a step shows the state after it, with what that step changed', async () => {
    await page.locator(`#timeline .bar[data-seq="2"]`).click();
    await page.locator('#tt-seq', { hasText: `2 / ${KEYS.length}` }).waitFor();
    // The caption changes at once; the state below it only once checkpoint 2 has been fetched.
    await page.locator('#tt-body:not([aria-busy]) #tt-state[data-checkpoint="2"]').waitFor();
    const caption = (await page.locator('.tt-caption').textContent()) ?? '';
    assert.match(caption, /After step #2, ResearchAgent\/extractFacts \(restored\)/);
    const keys = await page
      .locator('#tt-state .state-key')
      .evaluateAll((list) => (list as unknown as El[]).map((el) => [el.firstChild?.textContent, el.classList.contains('changed')]));
    assert.deepEqual(Object.fromEntries(keys as [string, boolean][]), { facts: true, quarter: false, recipients: false, sources: false, ticker: false });
    assert.match((await page.locator('#time-travel .facts').textContent()) ?? '', /Next stepResearchAgent\/summarize/);

    await page.locator('#tt-slider').fill('0');
    await page.locator('.tt-caption', { hasText: 'Before any step' }).waitFor();
    await page.locator('#tt-body:not([aria-busy]) #tt-state[data-checkpoint="0"]').waitFor();
    assert.deepEqual(await page.locator('#tt-state .state-key').evaluateAll((list) => (list as unknown as El[]).map((el) => el.firstChild?.textContent)), [
      'quarter',
      'recipients',
      'ticker',
    ]);
    assert.deepEqual(browser.errors, [], 'no script errors on the page');
  });

  it('with actions allowed: fork from a checkpoint, then resume the fork from its page', async () => {
    const runner = await Waypoint.create({ modules: [exampleModule({ outboxPath: db.env.WAYPOINT_OUTBOX!, llm: { delayMs: 1 } }), db.storage()] });
    const actions = await startUiServer({ store: runner.store, waypoint: runner, pipelines: [FinancialAnalysis], allowActions: true, port: 0, logger: silentLogger });
    try {
      await page.goto(`${actions.url}#/runs/q3-aapl`);
      await page.locator('#tt-state').waitFor();
      assert.equal(await page.locator('#action-resume').isDisabled(), true, 'a completed run cannot be resumed');
      assert.equal(await page.locator('#action-cancel').isDisabled(), true);
      await page.locator('#tt-slider').fill('5');
      await page.locator('#tt-seq', { hasText: `5 / ${KEYS.length}` }).waitFor();
      await page.locator('#fork-id').fill('q3-aapl-retry');
      await page.locator('#action-fork').click();
      await page.locator('h1 [data-status="paused"]').waitFor();
      assert.match(page.url(), /#\/runs\/q3-aapl-retry$/);
      assert.equal(await page.locator('#timeline .bar[data-kind="copied"]').count(), 5);
      await page.locator('#action-resume').click();
      await page.locator('h1 [data-status="completed"]').waitFor();
      assert.equal(await page.locator('#timeline .bar[data-kind="executed"]').count(), KEYS.length - 5);
      assert.match((await page.locator('#timeline [data-resume-session="1"]').textContent()) ?? '', /forked, resumed/);
      assert.equal((await runner.get('q3-aapl-retry'))?.status, 'completed');
      assert.deepEqual(browser.errors, []);
    } finally {
      await actions.close();
      await runner.close();
    }
  });
});
