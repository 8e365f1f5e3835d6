import { strict as assert } from 'node:assert';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ContainerModule } from 'inversify';
import { Waypoint, runProgress, type RunProgress } from '../../src/index';
import { renderShow } from '../../src/cli/commands/runs-show';
import { buildRunTree } from '../../src/cli/run-tree';
import { buildTimeline } from '../../src/cli/timeline';
import { readPlan } from '../../src/core/plan/plan-reader';
import { startUiServer, type UiServer } from '../../src/ui';
import type { RunListView } from '../../src/ui/read-api';
import type { RunDetailView } from '../../src/ui/run-views';
import { http, silentLogger } from '../ui/fixtures';
import { assertExit, waypoint } from './cli-harness';
import { ProgressTree } from './progress-module';

/** The `--module` exporting the loop-and-forEach pipeline (compiled next to this file). */
const MODULE = resolve(__dirname, 'progress-module.js');

/** Where the suite's runs are stored: a module for this process, and a store URL for the CLI when it can read it. */
export interface ProgressDatabase {
  storage(): ContainerModule;
  /** Null for a store only this process can see (memory): the CLI's views are then not compared. */
  storeUrl: string | null;
  dispose(): Promise<void>;
}

type Seen = Record<string, RunProgress>;

const STEPS = /(\d+)\/(\d+|\?) steps(?:, (\d+)\/(\d+) items)?/;

/** `6/9 steps, 2/4 items` (the CLI's text) back to a RunProgress. */
function parseText(text: string, what: string): RunProgress {
  const m = STEPS.exec(text);
  assert.ok(m, `${what}: no progress in:\n${text}`);
  const progress: RunProgress = { recorded: Number(m[1]), planned: m[2] === '?' ? null : Number(m[2]) };
  if (m[3] !== undefined) progress.items = { done: Number(m[3]), total: Number(m[4]) };
  return progress;
}

function fromView(view: { done: number; total: number | null; items?: { done: number; total: number } }): RunProgress {
  return { recorded: view.done, planned: view.total, ...(view.items ? { items: view.items } : {}) };
}

/**
 * Issue 35: one run's progress is the same in every view — `RunInfo` (get and list), the page's list and run
 * API, and the CLI's `runs show` (text and --json) and `runs list` (text and --json) — for a run with a loop
 * and a forEach, failed mid-way and completed; and `runs show` lists a control-flow run's side effects.
 */
export function defineProgressSuite(name: string, open: () => Promise<ProgressDatabase>): void {
  describe(`run progress on ${name}: one figure in every view`, { timeout: 120_000 }, () => {
    let db: ProgressDatabase;
    let runtime: Waypoint;
    let ui: UiServer;
    let bare: UiServer;
    const cli = (...args: string[]) => waypoint(['--store', db.storeUrl!, ...args]);

    before(async () => {
      db = await open();
      runtime = await Waypoint.create({ modules: [db.storage()], pipelines: [ProgressTree] });
      ui = await startUiServer({ store: runtime.store, port: 0, pipelines: [ProgressTree], logger: silentLogger });
      bare = await startUiServer({ store: runtime.store, port: 0, logger: silentLogger });
      const items = ['a', 'b', 'c', 'd'];
      try {
        process.env.WAYPOINT_PROGRESS_FAIL = 'c';
        await assert.rejects(runtime.run(ProgressTree, { runId: 'mid', input: { items } }), /cannot review c/);
        process.env.WAYPOINT_PROGRESS_FAIL = 'draft';
        await assert.rejects(runtime.run(ProgressTree, { runId: 'loop-fail', input: { items } }), /draft 1 refused/);
      } finally {
        delete process.env.WAYPOINT_PROGRESS_FAIL;
      }
      const done = await runtime.run(ProgressTree, { runId: 'done', input: { items } });
      assert.deepEqual(done.progress, { recorded: 9, planned: 9, items: { done: 4, total: 4 } });
      assert.equal(done.totalSteps, 9, 'totalSteps counts the tree as run, not the 4 step templates');
    });

    after(async () => {
      await ui?.close();
      await bare?.close();
      await runtime?.close();
      await db?.dispose();
    });

    /** Every view's figure for `runId`, by view; `plans` false: the views that have no pipeline code. */
    async function views(runId: string, plans = true): Promise<Seen> {
      const seen: Seen = {};
      const server = plans ? ui : bare;
      const list = await http<RunListView>(server.url, '/api/runs?limit=100');
      seen['page list'] = fromView(list.body.runs.find((r) => r.runId === runId)!.progress);
      const detail = await http<RunDetailView>(server.url, `/api/runs/${runId}`);
      seen['page run'] = fromView(detail.body.run.progress);
      if (plans) {
        seen['RunInfo get'] = (await runtime.get(runId))!.progress;
        seen['RunInfo list'] = (await runtime.list()).find((r) => r.runId === runId)!.progress;
        if (db.storeUrl === null) seen['runs show (rendered here)'] = parseText(/^ {2}progress {2}.*$/m.exec(await showText(runId))?.[0] ?? '', 'runs show');
      }
      if (db.storeUrl !== null) {
        const module = plans ? ['--module', MODULE] : [];
        const showJson = await cli(...module, '--json', 'runs', 'show', runId);
        assertExit(showJson, 0, 'runs show --json');
        seen['runs show --json'] = showJson.json<{ run: { progress: RunProgress } }>().run.progress;
        const show = await cli(...module, 'runs', 'show', runId);
        assertExit(show, 0, 'runs show');
        seen['runs show'] = parseText(/^ {2}progress {2}.*$/m.exec(show.stdout)?.[0] ?? show.stdout, 'runs show');
        const listJson = await cli(...module, '--json', 'runs', 'list');
        assertExit(listJson, 0, 'runs list --json');
        seen['runs list --json'] = listJson.json<{ runId: string; progress: RunProgress }[]>().find((r) => r.runId === runId)!.progress;
        const listText = await cli(...module, 'runs', 'list');
        const line = listText.stdout.split('\n').find((l) => l.startsWith(`${runId} `)) ?? '';
        seen['runs list'] = parseText(line, 'runs list');
      }
      return seen;
    }

    /**
     * `runs show`'s text rendered in this process (for a memory store, which the CLI's process cannot open),
     * from the same parts the command puts together.
     */
    async function showInProcess(runId: string): Promise<string> {
      const loaded = (await runtime.store.loadRun(runId))!;
      const operations = await runtime.store.listOperations(runId);
      const children = await runtime.store.listRuns({ parentRunId: runId });
      const plan = readPlan(ProgressTree);
      const timeline = buildTimeline(loaded.run, loaded.steps, operations, { integrity: {}, plan });
      const tree = buildRunTree(loaded.run, loaded.steps, operations, children, plan);
      return renderShow(loaded.run, timeline, new Date(), { tree, items: 'all' }, runProgress(loaded.run, loaded.steps, plan, children));
    }

    /** `runs show <runId>` with the module: the CLI's, or rendered in this process when the CLI cannot read the store. */
    async function showText(runId: string): Promise<string> {
      if (db.storeUrl === null) return showInProcess(runId);
      const show = await cli('--module', MODULE, 'runs', 'show', runId);
      assertExit(show, 0, `runs show ${runId}`);
      return show.stdout;
    }

    function assertEverywhere(seen: Seen, expected: RunProgress): void {
      for (const [view, progress] of Object.entries(seen)) assert.deepEqual(progress, expected, `${view} shows ${JSON.stringify(progress)}`);
    }

    it('a run failed in its forEach: steps recorded of steps known so far (the item list), items, the same in every view', async () => {
      assertEverywhere(await views('mid'), { recorded: 6, planned: 9, items: { done: 2, total: 4 } });
    });

    it('a run failed in the second iteration of its loop: that iteration is known, the forEach not yet', async () => {
      assertEverywhere(await views('loop-fail'), { recorded: 2, planned: 4 });
    });

    it('a completed run: recorded and planned meet, every item done', async () => {
      assertEverywhere(await views('done'), { recorded: 9, planned: 9, items: { done: 4, total: 4 } });
    });

    it('without the pipeline code the rows are the truth: no total before the run completes, the same in every view', async () => {
      assertEverywhere(await views('mid', false), { recorded: 6, planned: null, items: { done: 2, total: 4 } });
      assertEverywhere(await views('done', false), { recorded: 9, planned: 9, items: { done: 4, total: 4 } });
    });

    it('runs show lists the side effects of a control-flow run in text as --json has them', async () => {
      const text = await showText('done');
      assert.match(text, /^ {2}side effects$/m);
      for (const step of ['loop[0]/Draft/write', 'loop[2]/Draft/write']) assert.match(text, new RegExp(`^ {4}\\d+ ${step.replace(/[[\]]/g, '\\$&')}: save-draft: committed$`, 'm'));
      for (const i of [0, 1, 2, 3]) assert.match(text, new RegExp(`^ {4}\\d+ forEach\\(reviews\\)\\[${i}\\]/Reviewer/review: notify: committed$`, 'm'));
      // --json's timeline has the operations log's side effects per step: the text lists as many.
      const operations = (await runtime.store.listOperations('done')).filter((op) => op.stepKey !== '' && !op.name.startsWith('attempt:') && !op.name.startsWith('signal:'));
      assert.equal(operations.length, 3 + 4);
      assert.equal(text.match(/: (save-draft|notify): committed$/gm)?.length, operations.length, 'text lists each side effect');
      if (db.storeUrl !== null) {
        const json = (await cli('--module', MODULE, '--json', 'runs', 'show', 'done')).json<{ timeline: { entries: { sideEffects: unknown[] }[] } }>();
        assert.equal(
          json.timeline.entries.reduce((n, e) => n + e.sideEffects.length, 0),
          operations.length,
        );
      }
    });

    it('resuming the failed run: runs resume (or resume()) reports the figures the views then show', async () => {
      if (db.storeUrl !== null) {
        const resumed = await cli('--module', MODULE, 'runs', 'resume', 'mid');
        assertExit(resumed, 0, 'runs resume mid');
        assert.deepEqual(parseText(resumed.stdout, 'runs resume'), { recorded: 9, planned: 9, items: { done: 4, total: 4 } });
        assert.doesNotMatch(resumed.stdout, /of 4 steps/);
      } else {
        const result = await runtime.resume('mid');
        assert.deepEqual(result.progress, { recorded: 9, planned: 9, items: { done: 4, total: 4 } });
        assert.equal(result.totalSteps, 9);
      }
      assertEverywhere(await views('mid'), { recorded: 9, planned: 9, items: { done: 4, total: 4 } });
    });
  });
}
