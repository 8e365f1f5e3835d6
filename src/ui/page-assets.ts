import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { UiAssetsMissingError } from './errors';

/**
 * The page's scripts as compiled by tsconfig.browser.json, in the order they run: classic scripts that
 * share one scope (the helpers first, the router that starts the page last).
 */
const PAGE_SCRIPTS = ['dom.js', 'http.js', 'runs-list.js', 'run-page.js', 'run-operations.js', 'live-output.js', 'time-travel.js', 'timeline.js', 'flow.js', 'main.js'] as const;

/** Next to this file once compiled: dist/src/ui/browser, in the repository and in the installed package. */
const BROWSER_DIR = join(__dirname, 'browser');

let appJs: string | undefined;

/**
 * The whole page script, served as /assets/app.js (see {@link readPageScript}), read from disk once per process.
 *
 * @example
 * send(res, 200, 'text/javascript; charset=utf-8', pageScript());
 */
export function pageScript(): string {
  appJs ??= readPageScript(BROWSER_DIR);
  return appJs;
}

/**
 * The compiled scripts in `dir` in one strict-mode IIFE (nothing leaks into the page's globals), started
 * once the document is parsed (the tag is `defer`). Throws UiAssetsMissingError when one is missing.
 *
 * @example
 * const js = readPageScript(join(__dirname, 'browser'));
 */
export function readPageScript(dir: string): string {
  const parts = PAGE_SCRIPTS.map((name) => {
    const path = join(dir, name);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (error) {
      throw new UiAssetsMissingError(path, error);
    }
    // The wrapper below is strict already; each file's own directive would only be a stray expression.
    return `// ${name}\n${text.replace(/^"use strict";\r?\n/, '')}`;
  });
  return `(function () {\n'use strict';\n${parts.join('\n')}})();\n`;
}
