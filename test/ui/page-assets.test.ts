import { strict as assert } from 'node:assert';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Script } from 'node:vm';
import { UiAssetsMissingError } from '../../src/ui/errors';
import { readPageScript } from '../../src/ui/page-assets';

// dist/test/ui -> dist/src/ui/browser, where tsconfig.browser.json puts the compiled page scripts.
const BUILT = join(__dirname, '..', '..', 'src', 'ui', 'browser');

describe('ui: the page script built from src/ui/browser', () => {
  const temp = mkdtempSync(join(tmpdir(), 'waypoint-ui-assets-'));
  after(() => rmSync(temp, { recursive: true, force: true }));

  it('joins every compiled script into one strict classic script, the router last', () => {
    const js = readPageScript(BUILT);
    assert.doesNotThrow(() => new Script(js), 'parses as a classic script: no import or export left');
    const files = readdirSync(BUILT).filter((f) => f.endsWith('.js'));
    for (const file of files) assert.equal(js.split(`\n// ${file}\n`).length, 2, `${file} is in the script once`);
    assert.match(js, /^\(function \(\) \{\n'use strict';\n/);
    assert.doesNotMatch(js, /"use strict";/, 'the per-file directives are dropped inside the wrapper');
    assert.match(js, /\/\/ main\.js\n[\s\S]*route\(\);\n\}\)\(\);\n$/, 'the router starts the page, after every helper it calls');
  });

  it('fails with UI_ASSETS_MISSING, naming the file, when the browser build did not run', () => {
    for (const file of readdirSync(BUILT).filter((f) => f !== 'timeline.js')) copyFileSync(join(BUILT, file), join(temp, file));
    assert.throws(
      () => readPageScript(temp),
      (err: unknown) =>
        err instanceof UiAssetsMissingError && err.code === 'UI_ASSETS_MISSING' && err.message.includes(join(temp, 'timeline.js')) && err.message.includes('npm run build'),
    );
  });
});
