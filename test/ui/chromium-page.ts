import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/** Debian's `chromium` package; WAYPOINT_TEST_CHROMIUM points elsewhere (e.g. to check the failure below). */
export const CHROMIUM = process.env.WAYPOINT_TEST_CHROMIUM || '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-quic',
];
/** Repository root's test-artifacts/ (git-ignored), from dist/test/ui/. */
const ARTIFACTS = resolve(__dirname, '../../../test-artifacts');

/** A headless Chromium page for the UI's browser tests, with the script errors it has seen. */
export interface TestPage {
  page: Page;
  /** `page error: ...` and `console error: ...` lines, in order: a test asserts this stays empty. */
  errors: string[];
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/**
 * Launches headless Chromium (a fresh profile, en-GB, UTC, 15 s default timeout) and returns its page. Fails,
 * saying how to install it, when Chromium is missing: a browser test that silently skips never runs.
 *
 * @example
 * const browser = await openTestPage({ width: 1280, height: 860 }); try { await browser.page.goto(url); } finally { await browser.close(); }
 */
export async function openTestPage(viewport: { width: number; height: number }): Promise<TestPage> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}; the browser tests need it. Install Debian's package: apt-get update && apt-get install -y chromium (.ci/run does this).`,
    );
  }
  const profile = mkdtempSync(join(tmpdir(), 'waypoint-ui-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport, locale: 'en-GB', timezoneId: 'UTC' });
  } catch (error) {
    rmSync(profile, { recursive: true, force: true });
    throw error;
  }
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: string[] = [];
  page.setDefaultTimeout(15_000);
  page.on('pageerror', (error) => errors.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console error: ${message.text()}`);
  });
  return {
    page,
    errors,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** The path of `name` under test-artifacts/ (created if missing), for screenshots a reviewer looks at. */
export function artifactPath(name: string): string {
  mkdirSync(ARTIFACTS, { recursive: true });
  return join(ARTIFACTS, name);
}
