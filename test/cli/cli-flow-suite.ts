import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { parseStoreUrl } from '../../src/cli/store-url';
import { Waypoint } from '../../src/index';
import { assertExit, waypoint } from './cli-harness';
import { FlowTree } from './flow-module';

/** The `--module` exporting the control-flow pipeline (compiled next to this file). */
const FLOW_MODULE = resolve(__dirname, 'flow-module.js');

/** A store URL for the control-flow CLI suite, and how to drop it. */
export interface FlowDatabase {
  storeUrl: string;
  dispose(): Promise<void>;
}

/**
 * `runs show` / `runs list --parent` on a control-flow run stored in a real backend: the run is made in
 * this process (parallel + loop + branch + forEach over an agent and over a @Pipeline), then the compiled
 * binary reads it in a child process.
 */
export function defineCliFlowSuite(name: string, open: (dir: string) => Promise<FlowDatabase>): void {
  describe(`waypoint CLI: control-flow runs on ${name}`, { timeout: 120_000 }, () => {
    let dir: string;
    let db: FlowDatabase;
    const cli = (...args: string[]) => waypoint(['--store', db.storeUrl, ...args]);
    const files = Array.from({ length: 40 }, (_, i) => `f${i}`);

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'waypoint-cli-flow-'));
      db = await open(dir);
      const runtime = await Waypoint.create({ modules: [parseStoreUrl(db.storeUrl).module()], pipelines: [FlowTree] });
      try {
        await runtime.run(FlowTree, { runId: 'tree', input: { files, customers: ['x', 'y', 'z'] } });
        await runtime.run(FlowTree, { runId: 'fold-me', input: { files, customers: [] } });
      } finally {
        await runtime.close();
      }
    });

    after(async () => {
      await db?.dispose();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('runs show draws the tree with counts, decisions and child runs; --json carries it', async () => {
      const human = await cli('runs', 'show', 'tree');
      assertExit(human, 0, 'runs show tree');
      const text = human.stdout;
      assert.match(text, /^Run tree: flow-tree@1, completed$/m);
      assert.match(text, /^  parallel: 2 branch\(es\), completed$/m);
      assert.match(text, /^  loop: 3 iteration\(s\), stopped after iteration 2$/m);
      assert.match(text, /^ {4}\[1\] completed, then continue$/m);
      assert.match(text, /^  branch: case 'high' chosen, completed$/m);
      assert.match(text, /^  forEach\(reviews\): 40 item\(s\): 40 completed$/m);
      assert.match(text, /^ {4}\.\.\. 37 more item\(s\) not listed \(37 completed\); --items all lists every item$/m);
      assert.match(text, /^  forEach\(reports\) over child runs: 3 item\(s\): 3 completed$/m);
      assert.match(text, /^ {4}\[2\] completed {2}child run tree\/reports\/2 \(completed\)$/m);
      assert.ok(text.split('\n').length < 60, text);

      const all = await cli('runs', 'show', 'tree', '--items', 'all');
      assert.equal(all.stdout.split('\n').filter((l) => /^ {6}Reviewer\/review {2}completed/.test(l)).length, 40);

      const withPlan = await cli('runs', 'show', 'tree', '--module', FLOW_MODULE);
      assert.match(withPlan.stdout, /^  forEach\(reports\) over pipeline customer-report: 3 item\(s\): 3 completed$/m);
      assert.match(withPlan.stdout, /^  branch: case 'high' chosen \(cases: high, low\), completed$/m);

      const shown = (await cli('runs', 'show', 'tree', '--json')).json<{
        tree: { nodes: { kind: string; label?: string; counts?: Record<string, number>; parts?: { childRunId?: string }[] }[] };
      }>();
      const reviews = shown.tree.nodes.find((n) => n.label === 'forEach(reviews)')!;
      assert.deepEqual(reviews.counts, { completed: 40, skipped: 0, failed: 0, running: 0, queued: 0, pending: 0 });
      const reports = shown.tree.nodes.find((n) => n.label === 'forEach(reports)')!;
      assert.deepEqual(
        reports.parts!.map((p) => p.childRunId),
        ['tree/reports/0', 'tree/reports/1', 'tree/reports/2'],
      );
    });

    it('runs list --parent lists the children; runs show of a child names its parent', async () => {
      const listed = (await cli('runs', 'list', '--parent', 'tree', '--json')).json<{ runId: string; parentRunId: string }[]>();
      assert.deepEqual(listed.map((r) => [r.runId, r.parentRunId]).sort(), [
        ['tree/reports/0', 'tree'],
        ['tree/reports/1', 'tree'],
        ['tree/reports/2', 'tree'],
      ]);
      const table = await cli('runs', 'list', '--parent', 'tree');
      assertExit(table, 0, 'runs list --parent');
      assert.equal(table.stdout.trim().split('\n').length, 4);
      const none = await cli('runs', 'list', '--parent', 'tree/reports/0');
      assert.match(none.stdout, /^No runs with parent tree\/reports\/0 in /);
      const child = await cli('runs', 'show', 'tree/reports/1');
      assertExit(child, 0, 'runs show of a child');
      assert.match(child.stdout, /^ {2}parent {4}tree \(item 1 of its forEach\)$/m);
    });

    it('compact folds a control-flow run only with its pipeline (--module); without it the run is left as it is', async () => {
      const before = await cli('runs', 'show', 'fold-me', '--json');
      const rowsBefore = before.json<{ run: { lastSequence: number } }>().run.lastSequence;
      const plain = await cli('compact', 'fold-me', '--keep-last', '3', '--json');
      assertExit(plain, 0, 'compact without --module');
      assert.deepEqual(plain.json<{ compacted: unknown[]; leftAsIs: string[] }>().leftAsIs, ['fold-me']);
      assert.match(plain.stderr, /control-flow run\(s\) left as they are \(fold-me\).*--module/);
      const folded = await cli('compact', 'fold-me', '--keep-last', '3', '--module', FLOW_MODULE, '--json');
      assertExit(folded, 0, 'compact with --module');
      const [entry] = folded.json<{ compacted: { runId: string; rows: number }[] }>().compacted;
      assert.equal(entry?.runId, 'fold-me');
      assert.ok(entry.rows > 3 && entry.rows < rowsBefore, `folded ${entry?.rows} of ${rowsBefore} rows`);
      assertExit(await cli('verify', 'fold-me'), 0, 'verify after folding');
      // The folded run reads back the same final state (replayed from its base row).
      const runtime = await Waypoint.create({ modules: [parseStoreUrl(db.storeUrl).module()], pipelines: [FlowTree] });
      try {
        const again = await runtime.run<{ reviews: unknown[] }>(FlowTree, { runId: 'fold-me' });
        assert.equal(again.stepsExecuted, 0);
        assert.equal(again.state.reviews.length, files.length);
      } finally {
        await runtime.close();
      }
    });
  });
}
