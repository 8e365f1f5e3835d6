import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { IsOptional } from 'class-validator';
import { Agent, Pipeline, Step, Waypoint, forEach, loop, memoryStorage, type StepContext } from '../../src/index';
import { startUiServer, type UiServer } from '../../src/ui';
import type { ErrorBody } from './fixtures';
import type { LoopView, ForEachView } from '../../src/ui/flow-view';
import type { RunDetailView } from '../../src/ui/run-views';
import type { StepsPageView } from '../../src/ui/api-types';
import { http, silentLogger } from './fixtures';

const WIDE = 1200;
const ROUNDS = 700;

/** A class of WIDE steps, made the way a decorator would be applied to a long generated class. */
class Wide extends Agent {}
for (let i = 0; i < WIDE; i++) {
  const key = `s${i}`;
  const descriptor: PropertyDescriptor = { value: () => ({ last: i }), writable: true, configurable: true };
  Object.defineProperty(Wide.prototype, key, descriptor);
  Step()(Wide.prototype, key, descriptor);
}
class WideState {
  @IsOptional() last?: number;
}
@Pipeline({ name: 'window-wide', version: '1', agents: [Wide], state: WideState })
class WidePipeline {}

class Tick extends Agent {
  @Step() tick(ctx: StepContext<LoopState>) {
    return { count: (ctx.state.count ?? 0) + 1 };
  }
}
class Item extends Agent {
  @Step() visit(ctx: StepContext) {
    return { seen: ctx.itemIndex };
  }
}
class LoopState {
  @IsOptional() count?: number;
  @IsOptional() visits?: unknown[];
}
@Pipeline({
  name: 'window-flow',
  version: '1',
  state: LoopState,
  agents: [
    loop<LoopState>({ until: (s) => (s.count ?? 0) >= ROUNDS, maxIterations: ROUNDS + 1 }, Tick),
    forEach(() => Array.from({ length: ROUNDS }, (_, i) => i), Item, { into: 'visits' }),
  ],
})
class FlowPipeline {}

describe('ui: a long run is sent a window at a time (issue 40)', () => {
  let ui: UiServer;
  before(async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], pipelines: [WidePipeline, FlowPipeline] });
    await waypoint.run(WidePipeline, { runId: 'wide', input: {} });
    await waypoint.run(FlowPipeline, { runId: 'flow', input: {} });
    ui = await startUiServer({ store: waypoint.store, pipelines: [WidePipeline, FlowPipeline], port: 0, logger: silentLogger });
  });
  after(async () => ui?.close());

  it('a first screen is the newest steps, with the counts of what it left out', async () => {
    const { body } = await http<RunDetailView>(ui.url, '/api/runs/wide?steps=100');
    assert.deepEqual(body.window, { total: WIDE, older: WIDE - 100, since: null, olderSideEffects: 0 });
    assert.deepEqual(
      body.steps.map((s) => s.sequence),
      Array.from({ length: 100 }, (_, i) => WIDE - 99 + i),
    );
    // The plan's 1,200 steps are not resent: the agent lists the window's steps and counts the rest.
    assert.equal(body.agents[0].steps.length, 100);
    assert.equal(body.agents[0].hidden, WIDE - 100);
    assert.deepEqual(body.agents[0].steps[0], { name: `s${WIDE - 100}`, key: `Wide/s${WIDE - 100}`, index: WIDE - 100 });
    const whole = (await http<RunDetailView>(ui.url, '/api/runs/wide?steps=5000')).body;
    assert.equal(whole.steps.length, WIDE);
    assert.equal(whole.agents[0].hidden, 0);
    const first = (await http<RunDetailView>(ui.url, '/api/runs/wide')).body;
    assert.equal(first.steps.length, 500, 'without a query the page gets its first screen');
  });

  it('a poll with since gets only the newer steps, unless more came than the window holds', async () => {
    const poll = (await http<RunDetailView>(ui.url, `/api/runs/wide?steps=100&since=${WIDE - 10}`)).body;
    assert.deepEqual(poll.window, { total: WIDE, older: 0, since: WIDE - 10, olderSideEffects: 0 });
    assert.deepEqual(
      poll.steps.map((s) => s.sequence),
      Array.from({ length: 10 }, (_, i) => WIDE - 9 + i),
    );
    assert.equal((await http<RunDetailView>(ui.url, `/api/runs/wide?steps=100&since=${WIDE}`)).body.steps.length, 0);
    const behind = (await http<RunDetailView>(ui.url, '/api/runs/wide?steps=5&since=100')).body;
    assert.equal(behind.window.since, null, 'too far behind: the answer replaces what the page holds');
    assert.equal(behind.steps.length, 5);
    assert.equal(behind.window.older, WIDE - 5);
  });

  it('older steps come a page at a time from /steps?before=', async () => {
    const page = (await http<StepsPageView>(ui.url, '/api/runs/wide/steps?before=1101&limit=100')).body;
    assert.equal(page.older, 1000);
    assert.deepEqual([page.steps[0].sequence, page.steps[99].sequence, page.steps.length], [1001, 1100, 100]);
    const start = (await http<StepsPageView>(ui.url, '/api/runs/wide/steps?before=3&limit=100')).body;
    assert.deepEqual([start.older, start.steps.map((s) => s.sequence)], [0, [1, 2]]);
  });

  it('refuses bad window queries with typed errors', async () => {
    for (const path of [
      '/api/runs/wide?steps=0',
      '/api/runs/wide?steps=5001',
      '/api/runs/wide?since=-1',
      '/api/runs/wide?steps=1&steps=2',
      '/api/runs/wide?page=2',
      '/api/runs/wide/steps',
      '/api/runs/wide/steps?before=x',
    ]) {
      const answer = await http<ErrorBody>(ui.url, path);
      assert.equal(answer.status, 400, path);
      assert.equal(answer.body.error.code, 'BAD_QUERY', path);
    }
    assert.equal((await http<ErrorBody>(ui.url, '/api/runs/nope/steps?before=1')).status, 404);
  });

  it("a long loop sends its newest iterations and a long forEach its first items, with every item's steps the tree names", async () => {
    const { body } = await http<RunDetailView>(ui.url, '/api/runs/flow?steps=100');
    const l = body.flow!.root.find((n) => n.kind === 'loop') as LoopView;
    assert.equal(l.hidden, ROUNDS - 100);
    assert.deepEqual([l.iterations[0].key, l.iterations[99].key], [String(ROUNDS - 100), String(ROUNDS - 1)]);
    const each = body.flow!.root.find((n) => n.kind === 'forEach') as ForEachView;
    assert.equal(each.hidden, ROUNDS - 100);
    assert.deepEqual([each.items[0].key, each.items.length, each.counts.completed], ['0', 100, ROUNDS]);
    // The tree's steps outside the window come as flowSteps, so the page can draw every node it is sent.
    const held = new Set([...body.steps, ...body.flowSteps].map((s) => s.sequence));
    const named: number[] = [];
    for (const it of [...l.iterations, ...each.items]) for (const c of it.children) if (c.kind === 'step' && c.sequence !== null) named.push(c.sequence);
    assert.equal(named.length, 200);
    assert.deepEqual(
      named.filter((s) => !held.has(s)),
      [],
    );
    assert.ok(body.flowSteps.length >= 100, 'the first items ran before the window');
  });
});
