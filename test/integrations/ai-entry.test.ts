import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { describe, it } from 'node:test';

const ROOT = path.resolve(__dirname, '../../..');

/** Modules under node_modules/ai/ that a fresh process has loaded after running `code`. */
function sdkModulesLoadedBy(code: string): string[] {
  const script = `${code}; console.log(JSON.stringify(Object.keys(require.cache).filter((k) => k.includes('${path.sep}node_modules${path.sep}ai${path.sep}'))))`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' })) as string[];
}

describe('waypoint-durable/ai entry points', () => {
  it('the root entry does not load the AI SDK; the ./ai subpath export does, and exposes the wrappers', () => {
    assert.deepEqual(sdkModulesLoadedBy("require('waypoint-durable')"), [], 'users without `ai` installed pay nothing for it');
    assert.notDeepEqual(
      sdkModulesLoadedBy(
        "const m = require('waypoint-durable/ai'); if (typeof m.durableModel !== 'function' || typeof m.durableTools !== 'function') throw new Error('missing exports')",
      ),
      [],
    );
  });
});
