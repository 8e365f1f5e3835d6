import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CheckpointJson, RunDetailJson, RunListJson } from './browser/api';
import { UiAssetsMissingError } from './errors';
import type { RunListView } from './read-api';
import type { RunDetailView } from './run-views';
import type { CheckpointView } from './time-travel';

/**
 * The page's scripts as compiled by tsconfig.browser.json, in the order they run: classic scripts that
 * share one scope (the helpers first, the router that starts the page last).
 */
const PAGE_SCRIPTS = ['dom.js', 'http.js', 'runs-list.js', 'run-page.js', 'time-travel.js', 'timeline.js', 'flow.js', 'main.js'] as const;

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

/** What JSON.stringify makes of a value of type T: dates become ISO strings. */
type Json<T> = T extends Date ? string : T extends readonly (infer U)[] ? Json<U>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;
/** Compiles only when what the server sends (`Sent`) has every field the page reads, with the same type. */
type Fits<Sent extends Read, Read> = [Sent, Read];
// The page's view of the API (browser/api.d.ts) against the views the API serializes: a renamed or
// retyped field fails this build instead of the page.
type PageApiContract = [Fits<Json<RunListView>, RunListJson>, Fits<Json<RunDetailView>, RunDetailJson>, Fits<Json<CheckpointView>, CheckpointJson>];
