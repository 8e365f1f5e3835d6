/**
 * The LangGraph example runs from one command and proves what it prints: SIGKILL mid-graph then resume,
 * and interrupt() / Command({ resume }) across processes (examples/langgraph/demo.ts, on SQLite).
 */
import { strict as assert } from 'node:assert';
import { readdirSync } from 'node:fs';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import { runDemo } from '../helpers/child-process';

const DEMO = path.resolve(__dirname, '../../examples/langgraph/demo.js');

describe('examples/langgraph demo', () => {
  it('kills a worker mid-graph, resumes without re-running finished nodes, and resumes an interrupt in another process', async () => {
    await runDemo(DEMO, {
      envPrefix: 'WAYPOINT_LG_',
      checks: 9,
      inspect: (out, cwd) => {
        assert.match(out, /worker A died by SIGKILL/);
        assert.match(out, /model calls: plan 1, market 1, filings 2 \(1 cut off by the kill\), write 1/);
        assert.match(out, /All checks passed/);
        assert.deepEqual(readdirSync(path.join(cwd, '.waypoint')), [], 'the demo removed its files');
      },
    });
  });
});
