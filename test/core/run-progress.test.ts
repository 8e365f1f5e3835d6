import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { Waypoint, memoryStorage, runProgress } from '../../src/index';
import { readPlan } from '../../src/core/plan/plan-reader';
import type { LoadedRun, RunRecord } from '../../src/contract/records';
import { FlowTree } from '../cli/flow-module';
import { ProgressTree } from '../cli/progress-module';

/**
 * `runProgress` (issue 35) on every construct at once (parallel, loop, branch, forEach over an agent and
 * over a @Pipeline): for every prefix of a real run's rows, as a reader sees the run mid-way.
 */
describe('runProgress: steps recorded of steps known so far', () => {
  let waypoint: Waypoint;
  let loaded: LoadedRun;
  let children: RunRecord[];
  const plan = readPlan(FlowTree);
  const files = ['f0', 'f1', 'f2'];

  before(async () => {
    waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [FlowTree] });
    await waypoint.run(FlowTree, { runId: 'tree', input: { files, customers: ['x', 'y'] } });
    loaded = (await waypoint.store.loadRun('tree'))!;
    children = await waypoint.store.listRuns({ parentRunId: 'tree' });
  });

  after(() => waypoint.close());

  it('counts steps, not decisions: planner, 2 lanes, 3 drafts, escalate, 3 reviews; 3 + 2 items', () => {
    // 1 + 2 + 3 loop iterations + the 'high' case + 3 items; the reports are child runs (their steps are theirs).
    assert.deepEqual(runProgress(loaded.run, loaded.steps, plan, children), { recorded: 10, planned: 10, items: { done: 5, total: 5 } });
    assert.ok(loaded.run.lastSequence > 10, 'the run has decision rows, which are not steps');
  });

  it('mid-way never shows more recorded than planned, and planned only grows, meeting recorded at the end', () => {
    const running: RunRecord = { ...loaded.run, status: 'running' };
    let previous = 0;
    for (let k = 0; k <= loaded.steps.length; k += 1) {
      const p = runProgress(running, loaded.steps.slice(0, k), plan, children);
      assert.ok(p.planned !== null && p.recorded <= p.planned, `after ${k} rows: ${JSON.stringify(p)}`);
      assert.ok(p.planned >= previous, `after ${k} rows planned fell from ${previous} to ${p.planned}`);
      previous = p.planned;
    }
    // Every decision is recorded: the tree is known whole even before the run is marked completed.
    assert.deepEqual(runProgress(running, loaded.steps, plan, children), { recorded: 10, planned: 10, items: { done: 5, total: 5 } });
  });

  it('knows the next loop iteration once a check said continue, and a branch only once it chose', () => {
    const running: RunRecord = { ...loaded.run, status: 'running' };
    const upTo = (path: string) => loaded.steps.slice(0, loaded.steps.findIndex((s) => s.path === path) + 1);
    // Planner, 2 lanes, iteration 0 recorded and its check said continue: iteration 1 is known.
    assert.deepEqual(runProgress(running, upTo('loop[0]#until'), plan), { recorded: 4, planned: 5 });
    // Before any iteration: the first one is known (a loop runs its body at least once).
    assert.deepEqual(runProgress(running, upTo('parallel[1]/Docs/read'), plan), { recorded: 3, planned: 4 });
    // The loop stopped; the branch has not chosen: its case's steps are not known yet.
    assert.deepEqual(runProgress(running, upTo('loop[2]#until'), plan), { recorded: 6, planned: 6 });
    assert.deepEqual(runProgress(running, upTo('branch'), plan), { recorded: 6, planned: 7 });
    // The item list is recorded: its items are known, none done.
    assert.deepEqual(runProgress(running, upTo('forEach(reviews)'), plan), { recorded: 7, planned: 10, items: { done: 0, total: 3 } });
  });

  it('without the plan: the rows alone, no total until the run completes', () => {
    const running: RunRecord = { ...loaded.run, status: 'running' };
    assert.deepEqual(runProgress(running, loaded.steps.slice(0, 5)), { recorded: 4, planned: null });
    assert.deepEqual(runProgress(loaded.run, loaded.steps, undefined, children), { recorded: 10, planned: 10, items: { done: 5, total: 5 } });
  });

  it('a straight-line view of the same name does not show more recorded than planned', () => {
    const other = { ...plan, linear: true, steps: plan.steps.slice(0, 2) };
    const p = runProgress({ ...loaded.run, status: 'failed' }, loaded.steps, other);
    assert.equal(p.recorded, 10);
    assert.equal(p.planned, 10);
  });

  it('after retention folded the loop into a base row, its iterations still count (from the folded paths)', async () => {
    const compacting = await Waypoint.create({ modules: [memoryStorage()], pipelines: [ProgressTree], retention: { keepLast: 2 } });
    try {
      await compacting.run(ProgressTree, { runId: 'folded', input: { items: ['a', 'b', 'c', 'd', 'e', 'f'] } });
      const progressPlan = readPlan(ProgressTree);
      assert.ok((await compacting.retention.compact('folded', { plan: progressPlan })) > 0, 'rows were folded');
      const folded = (await compacting.store.loadRun('folded'))!;
      assert.equal(folded.steps[0].stepName, 'base');
      // Seen as a reader mid-way would, before the last step's row: 1 + 3 folded iterations + 6 items + 1 known.
      const midway = folded.steps.slice(0, -1);
      assert.deepEqual(runProgress({ ...folded.run, status: 'running' }, midway, progressPlan), { recorded: 10, planned: 11, items: { done: 6, total: 6 } });
    } finally {
      await compacting.close();
    }
  });
});
