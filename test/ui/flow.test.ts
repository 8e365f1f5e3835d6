import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { IsOptional } from 'class-validator';
import { Agent, NonRetryableError, Pipeline, Step, Waypoint, branch, forEach, loop, memoryStorage, parallel, type StepContext } from '../../src/index';
import { startUiServer, type UiServer } from '../../src/ui';
import type { ChildRunsView } from '../../src/ui/read-api';
import type { RunDetailView } from '../../src/ui/run-views';
import type { CheckpointView } from '../../src/ui/time-travel';
import type { BranchView, FlowStepNodeView, ForEachView, LoopView, ParallelView } from '../../src/ui/flow-view';
import { http, silentLogger, type Wire } from './fixtures';
import { artifactPath, openTestPage, type TestPage } from './chromium-page';

const ITEMS = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface El {
  getAttribute(name: string): string | null;
  readonly textContent: string | null;
}

class FlowState {
  @IsOptional() files?: number[];
  @IsOptional() customers?: string[];
  @IsOptional() failAt?: number;
  @IsOptional() n?: number;
  @IsOptional() slow?: string;
  @IsOptional() fast?: string;
  @IsOptional() big?: boolean;
  @IsOptional() reviews?: unknown[];
  @IsOptional() reports?: unknown[];
}

class Planner extends Agent {
  @Step() plan() {
    return { n: 0 };
  }
}
class SlowResearch extends Agent {
  @Step() async research() {
    await sleep(60);
    return { slow: 'slow' };
  }
}
class FastResearch extends Agent {
  @Step() async lookup() {
    await sleep(20);
    return { fast: 'fast' };
  }
}
class Counter extends Agent {
  @Step() count(ctx: StepContext<FlowState>) {
    return { n: (ctx.state.n ?? 0) + 1 };
  }
}
class Big extends Agent {
  @Step() handle() {
    return { big: true };
  }
}
class Optional extends Agent {
  @Step({ when: () => false }) extra() {
    return {};
  }
}
class Small extends Agent {
  @Step() handle() {
    return { big: false };
  }
}
class Reviewer extends Agent {
  @Step() review(ctx: StepContext<FlowState>) {
    if (ctx.itemIndex === ctx.state.failAt) return Promise.reject(new NonRetryableError(`item ${ctx.itemIndex} cannot be reviewed`));
    return { file: ctx.item };
  }
}
class ReportState {
  @IsOptional() report?: string;
}
class Reporter extends Agent {
  @Step() report(ctx: StepContext<ReportState>) {
    return { report: `report for ${String(ctx.item)}` };
  }
}
@Pipeline({ name: 'ui-flow-report', version: '1', state: ReportState, agents: [Reporter] })
class CustomerReport {}

@Pipeline({
  name: 'ui-flow',
  version: '1',
  state: FlowState,
  agents: [
    Planner,
    parallel(SlowResearch, [FastResearch]),
    loop({ until: (s: FlowState) => (s.n ?? 0) >= 3, maxIterations: 5 }, Counter),
    branch((s: FlowState) => ((s.n ?? 0) >= 3 ? 'big' : 'small'), { big: [Big, Optional], small: Small }),
    forEach((s: FlowState) => s.files ?? [], Reviewer, { into: 'reviews', concurrency: 1 }),
    forEach((s: FlowState) => s.customers ?? [], CustomerReport, { into: 'reports', concurrency: 2 }),
  ],
})
class UiFlow {}

describe('ui: a control-flow run drawn as lanes, iterations and item groups', () => {
  let waypoint: Waypoint;
  let ui: UiServer;
  let bare: UiServer;
  let browser: TestPage;
  let page: Page;

  before(async () => {
    browser = await openTestPage({ width: 1280, height: 900 });
    page = browser.page;
    waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [UiFlow, CustomerReport] });
    const files = Array.from({ length: ITEMS }, (_, i) => i);
    const ok = await waypoint.run(UiFlow, { runId: 'flow-ok', input: { files, customers: ['ada', 'bob', 'cyd'] } });
    assert.equal(ok.status, 'completed');
    await assert.rejects(waypoint.run(UiFlow, { runId: 'flow-failed', input: { files: files.slice(0, 10), customers: ['ada'], failAt: 6 } }));
    ui = await startUiServer({ store: waypoint.store, pipelines: [UiFlow], port: 0, logger: silentLogger });
    // Without the plan, the tree comes from the rows' paths and decisions alone.
    bare = await startUiServer({ store: waypoint.store, port: 0, logger: silentLogger });
  });

  after(async () => {
    await browser?.close();
    await ui?.close();
    await bare?.close();
    await waypoint?.close();
  });

  for (const which of ['with the plan', 'without the plan'] as const) {
    it(`serves the tree ${which}: lanes, iterations with decisions, the case chosen, item counts, child runs`, async () => {
      const server = which === 'with the plan' ? ui : bare;
      const { status, body } = await http<RunDetailView>(server.url, '/api/runs/flow-ok');
      assert.equal(status, 200);
      const root = body.flow!.root;
      assert.deepEqual(
        root.map((n) => n.kind),
        ['step', 'parallel', 'loop', 'branch', 'forEach', 'forEach'],
      );
      const [, par, lp, br, items, kids] = root as Wire<[FlowStepNodeView, ParallelView, LoopView, BranchView, ForEachView, ForEachView]>;
      assert.deepEqual(
        par.lanes.map((l) => [l.key, l.children.map((c) => c.path)]),
        [
          ['0', ['parallel[0]/SlowResearch/research']],
          ['1', ['parallel[1]/FastResearch/lookup']],
        ],
      );
      assert.deepEqual(
        lp.iterations.map((i) => [i.key, i.decision]),
        [
          ['0', 'continue'],
          ['1', 'continue'],
          ['2', 'stop'],
        ],
      );
      assert.equal(br.chosen, 'big');
      assert.deepEqual(
        (br.cases[0].children as Wire<FlowStepNodeView>[]).map((c) => [c.path, c.status]),
        [
          ['branch[big]/Big/handle', 'completed'],
          ['branch[big]/Optional/extra', 'skipped'],
        ],
      );
      assert.deepEqual([items.total, items.counts], [ITEMS, { completed: ITEMS, skipped: 0, started: 0, queued: 0, failed: 0, notRecorded: 0 }]);
      assert.equal(items.childRuns, false);
      assert.equal(kids.childRuns, true);
      assert.deepEqual(
        kids.items.map((i) => [i.key, i.child?.runId, i.child?.status]),
        [0, 1, 2].map((i) => [String(i), `flow-ok/reports/${i}`, 'completed']),
      );
      // Progress counts recorded steps, the skipped one included (the cursor means nothing for a tree): 1 + 2 + 3 + 2 + 1,000;
      // the items are the reviews and the three child runs. Without the plan the same figures, from the rows alone.
      const basis = which === 'with the plan' ? 'flow' : 'recorded';
      const steps = 1 + 2 + 3 + 2 + ITEMS;
      assert.deepEqual(body.run.progress, { done: steps, total: steps, basis, items: { done: ITEMS + 3, total: ITEMS + 3 } });
      assert.deepEqual(body.systemRows, [], 'decisions are drawn in the tree, not listed as runtime rows');

      const failed = (await http<RunDetailView>(server.url, '/api/runs/flow-failed')).body;
      const each = failed.flow!.root.find((n): n is Wire<ForEachView> => n.kind === 'forEach')!;
      assert.deepEqual([each.total, each.counts], [10, { completed: 6, skipped: 0, started: 0, queued: 0, failed: 1, notRecorded: 3 }]);
      // The failing item has attempts and no row: shown in its item, named by agent and step.
      assert.deepEqual(each.items[6].children, [{ kind: 'step', path: 'forEach(reviews)[6]/Reviewer/review', sequence: null, status: 'failed' }]);
      assert.deepEqual(
        failed.failedSteps.map((f) => [f.key, f.agentId, f.name]),
        [['forEach(reviews)[6]/Reviewer/review', 'Reviewer', 'review']],
      );
      // Failed in the reviews: their 10 items are known (the reports' are not yet); without the plan, no total.
      const known = which === 'with the plan' ? 1 + 2 + 3 + 2 + 10 : null;
      assert.deepEqual(failed.run.progress, { done: 1 + 2 + 3 + 2 + 6, total: known, basis, items: { done: 6, total: 10 } });
    });
  }

  it("lists a run's children at /api/runs/:id/children, and a child names its parent", async () => {
    const { status, body } = await http<ChildRunsView>(ui.url, '/api/runs/flow-ok/children');
    assert.equal(status, 200);
    assert.deepEqual(
      body.runs.map((r) => [r.runId, r.status, r.pipeline]),
      [0, 1, 2].map((i) => [`flow-ok/reports/${i}`, 'completed', 'ui-flow-report']),
    );
    const child = (await http<RunDetailView>(ui.url, `/api/runs/${encodeURIComponent('flow-ok/reports/1')}`)).body;
    assert.deepEqual(child.run.parent, { runId: 'flow-ok', itemIndex: 1 });
    assert.equal(child.flow, null, 'a straight-line child is drawn as before');
    assert.equal((await http(ui.url, '/api/runs/nope/children')).status, 404);
  });

  it('time travel replays a control-flow run through its plan: joins and forEach results are in the state', async () => {
    const latest = (await http<RunDetailView>(ui.url, '/api/runs/flow-ok')).body.checkpoints.latest;
    const { status, body } = await http<CheckpointView>(ui.url, `/api/runs/flow-ok/checkpoints/${latest}`);
    assert.equal(status, 200);
    const state = body.checkpoint.shared_context as FlowState;
    assert.equal(state.reviews?.length, ITEMS);
    assert.deepEqual(state.reviews?.[999], { file: 999 });
    assert.deepEqual(
      state.reports,
      ['ada', 'bob', 'cyd'].map((c) => ({ report: `report for ${c}` })),
    );
    assert.deepEqual([state.slow, state.fast, state.n, state.big], ['slow', 'fast', 3, true]);
    // After the second loop iteration (#7: the parallel's join row is #4), before the third.
    assert.equal((await http<CheckpointView>(ui.url, '/api/runs/flow-ok/checkpoints/7')).body.checkpoint.shared_context.n, 2);
  });

  it('draws the tree in Chromium and follows the links between parent and child runs', async () => {
    await page.goto(`${ui.url}#/runs/flow-ok`);
    await page.locator('#timeline .f-parallel').waitFor();
    // Lanes side by side on one axis: the fast lane's bar starts with the slow one's, so they overlap.
    assert.equal(await page.locator('#timeline .f-parallel .f-lane').count(), 2);
    const slow = (await page.locator('#timeline .f-lane[data-lane="0"] .bar').boundingBox())!;
    const fast = (await page.locator('#timeline .f-lane[data-lane="1"] .bar').boundingBox())!;
    assert.ok(fast.x < slow.x + slow.width && slow.x < fast.x + fast.width, `lanes do not overlap: slow ${JSON.stringify(slow)}, fast ${JSON.stringify(fast)}`);
    assert.ok(slow.width > fast.width, 'the slower branch has the longer bar');

    const iterations = await page
      .locator('#timeline .f-iteration')
      .evaluateAll((list) => (list as unknown as El[]).map((el) => [el.getAttribute('data-iteration'), (el.textContent ?? '').includes('until: stop')]));
    assert.deepEqual(iterations, [
      ['0', false],
      ['1', false],
      ['2', true],
    ]);
    assert.match((await page.locator('#timeline .f-branch .f-head').textContent()) ?? '', /case chosen: big/);
    assert.equal(await page.locator('#timeline .f-branch .f-step[data-status="skipped"]').count(), 1);

    // 1,000 items: one collapsed line with the counts, no item rows until it is opened, then a page at a time.
    const reviews = page.locator('#timeline details.f-foreach[data-label="forEach(reviews)"]');
    assert.match((await reviews.locator('summary').textContent()) ?? '', /1000 items: 1000 completed.*0 not yet recorded/);
    assert.equal(await reviews.evaluate((el) => (el as unknown as { open: boolean }).open), false);
    assert.equal(await reviews.locator('.f-item').count(), 0);
    await reviews.locator('summary').click();
    await reviews.locator('.f-item').first().waitFor();
    assert.equal(await reviews.locator('.f-item').count(), 50);
    await reviews.locator('.f-more').click();
    await reviews.locator('.f-item[data-item="99"]').waitFor();
    assert.equal(await reviews.locator('.f-item').count(), 100);

    const reports = page.locator('#timeline details.f-foreach[data-label="forEach(reports)"]');
    assert.match((await reports.locator('summary').textContent()) ?? '', /3 items, each a child run: 3 completed/);
    const links = await reports.locator('a.child-link').evaluateAll((list) => (list as unknown as El[]).map((el) => el.getAttribute('data-run-id')));
    assert.deepEqual(links, ['flow-ok/reports/0', 'flow-ok/reports/1', 'flow-ok/reports/2']);
    assert.match((await page.locator('#run-header').textContent()) ?? '', /Progress.*1008 \/ 1008 · items 1003 \/ 1003/);
    await page.locator('#timeline').screenshot({ path: artifactPath('ui-flow-timeline.png') });

    // The page holds the newest 500 of the run's 1,008 steps (the tree's early steps came with it as flowSteps),
    // and its table shows a page of them until asked for all, each named by its path (sequences count the
    // parallel's join row, #4, which the table does not list).
    assert.equal(await page.locator('#steps tbody tr[data-seq]').count(), 100);
    assert.match((await page.locator('#steps .steps-more').first().textContent()) ?? '', /508 earlier steps not loaded/);
    assert.equal(await page.locator('#steps tbody tr[data-seq="5"]').count(), 0);
    await page.locator('#steps-all').click();
    await page.locator(`#steps tbody tr[data-seq="${ITEMS + 14}"]`).waitFor();
    await page.locator('#steps tbody tr[data-seq="5"]').waitFor();
    assert.equal(await page.locator('#steps tbody tr[data-seq]').count(), 1 + 2 + 3 + 2 + ITEMS);
    assert.match((await page.locator('#steps tbody tr[data-seq="5"]').textContent()) ?? '', /loop\[0\]\/Counter\/count/);
    assert.match((await page.locator('#steps tbody tr[data-seq="13"]').textContent()) ?? '', /branch\[big\]\/Optional\/extra.*skipped/);
    await page.locator('#timeline .f-step[data-path="loop[1]/Counter/count"]').click();
    await page.locator('.tt-caption', { hasText: 'loop[1]/Counter/count' }).waitFor();

    await reports.locator('a.child-link[data-run-id="flow-ok/reports/2"]').click();
    await page.locator('h1', { hasText: 'flow-ok/reports/2' }).waitFor();
    await page.locator('#timeline .bar').first().waitFor();
    assert.equal(await page.locator('#timeline .flow').count(), 0, 'the child is a straight line: the usual timeline');
    await page.locator('#parent-link').click();
    await page
      .locator('h1', { hasText: /^flow-ok/ })
      .locator('[data-status="completed"]')
      .waitFor();
    await page.locator('#timeline .f-parallel').waitFor();

    await page.goto(`${ui.url}#/runs/flow-failed`);
    const failedItems = page.locator('#timeline details.f-foreach[data-label="forEach(reviews)"]');
    await failedItems.waitFor();
    assert.match((await failedItems.locator('summary').textContent()) ?? '', /10 items: 6 completed.*1 failed.*3 not yet recorded/);
    assert.equal(await failedItems.locator('.f-item').count(), 7, 'a small group starts open');
    assert.match((await failedItems.locator('.f-item[data-item="6"]').textContent()) ?? '', /failed ×1.*NON_RETRYABLE: item 6 cannot be reviewed/);
    assert.deepEqual(browser.errors, [], 'no script errors on the page');
  });
});
