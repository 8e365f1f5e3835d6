/**
 * The test kit under the runners users have: a vitest project (unplugin-swc with decoratorMetadata) and a
 * jest project (@swc/jest) each run a crashTest of refund-pipeline.ts, compiled by swc, not tsc.
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { describe, it } from 'node:test';

const REPO = path.resolve(__dirname, '../../..');
const HERE = path.join(REPO, 'test', 'kit-runners');

function bin(pkg: string, file: string): string {
  return path.join(path.dirname(require.resolve(`${pkg}/package.json`, { paths: [REPO] })), file);
}

function run(args: string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, args, { cwd: REPO, env: { ...process.env, CI: '1', NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output }));
  });
}

describe('crashTest under vitest and jest', () => {
  it('vitest (unplugin-swc, decoratorMetadata) runs the crash test and it passes', async () => {
    const { code, output } = await run([bin('vitest', 'vitest.mjs'), 'run', '--config', path.join(HERE, 'vitest.swc.config.mjs')]);
    assert.equal(code, 0, output.slice(-4000));
    assert.match(output, /Tests\s+1 passed \(1\)/);
  });

  it('jest (@swc/jest) runs the crash test and it passes', async () => {
    const { code, output } = await run([bin('jest', 'bin/jest.js'), '--config', path.join(HERE, 'jest.config.cjs')]);
    assert.equal(code, 0, output.slice(-4000));
    assert.match(output, /Tests:\s+1 passed, 1 total/);
  });
});
