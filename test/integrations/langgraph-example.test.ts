/**
 * The LangGraph example runs from one command and proves what it prints: SIGKILL mid-graph then resume,
 * and interrupt() / Command({ resume }) across processes (examples/langgraph/demo.ts, on SQLite).
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';

const DEMO = path.resolve(__dirname, '../../examples/langgraph/demo.js');

describe('examples/langgraph demo', () => {
  it('kills a worker mid-graph, resumes without re-running finished nodes, and resumes an interrupt in another process', async () => {
    // The demo writes under ./.waypoint: run it from a temp dir.
    const cwd = mkdtempSync(path.join(tmpdir(), 'waypoint-lg-demo-'));
    try {
      const env = { ...process.env };
      for (const name of Object.keys(env)) if (name.startsWith('WAYPOINT_LG_')) delete env[name];
      const run = spawn(process.execPath, [DEMO], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      run.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
      run.stderr.setEncoding('utf8').on('data', (c: string) => (out += c));
      const code = await new Promise<number | null>((resolve, reject) => {
        run.once('error', reject);
        run.once('close', resolve);
      });
      assert.equal(code, 0, out);
      const checks = out.split('\n').filter((l) => /^\s+[✓✗] /.test(l));
      assert.equal(checks.length, 9, out);
      assert.ok(
        checks.every((l) => l.includes('✓')),
        out,
      );
      assert.match(out, /worker A died by SIGKILL/);
      assert.match(out, /model calls: plan 1, market 1, filings 2 \(1 cut off by the kill\), write 1/);
      assert.match(out, /All checks passed/);
      assert.deepEqual(readdirSync(path.join(cwd, '.waypoint')), [], 'the demo removed its files');
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
