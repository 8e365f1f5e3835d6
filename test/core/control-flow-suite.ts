import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { IsOptional, IsString } from 'class-validator';
import type { ContainerModule } from 'inversify';
import {
  Agent,
  branch,
  forEach,
  loop,
  NonRetryableError,
  parallel,
  Pipeline,
  Reducer,
  SideEffect,
  Step,
  Waypoint,
  currentOperation,
  type StepContext,
  type CreateOptions,
  WaypointError,
} from '../../src/index';

const concat = (a: string[] = [], b: string[] = []) => [...a, ...b];

class FlowState {
  @IsString() repo!: string;
  @IsOptional() @Reducer(concat) findings?: string[];
  @IsOptional() web?: string;
  @IsOptional() docs?: string;
  @IsOptional() summary?: string;
  @IsOptional() api?: string;
  @IsOptional() attempts?: number;
  @IsOptional() testsPass?: boolean;
  @IsOptional() risk?: string;
  @IsOptional() escalated?: boolean;
  @IsOptional() files?: string[];
  @IsOptional() reviews?: unknown[];
  @IsOptional() published?: string;
}

/** Every step run, in order, with its path: what "no completed step runs again" is checked against. */
let runs: string[] = [];
let failAt = new Set<string>();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Records the step; an injected failure rejects, so the step fails the way a real (async) step does. */
function track(ctx: StepContext<FlowState>): Promise<void> {
  runs.push(ctx.path);
  return failAt.delete(ctx.path) ? Promise.reject(new NonRetryableError(`injected failure at ${ctx.path}`)) : Promise.resolve();
}

class Planner extends Agent {
  @Step() async plan(ctx: StepContext<FlowState>) {
    await track(ctx);
    return { files: ['a.ts', 'b.ts', 'c.ts', 'd.ts', 'e.ts'], findings: ['plan'] };
  }
}
class WebResearch extends Agent {
  @Step() async search(ctx: StepContext<FlowState>) {
    await sleep(30);
    await track(ctx);
    return { web: 'web', findings: ['web'] };
  }
}
class DocsResearch extends Agent {
  @Step() async read(ctx: StepContext<FlowState>) {
    await sleep(10);
    await track(ctx);
    return { docs: 'docs', findings: ['docs'] };
  }
}
class Summarizer extends Agent {
  @Step() async summarize(ctx: StepContext<FlowState>) {
    await sleep(20);
    await track(ctx);
    // A branch sees the fork's state plus its own updates, not a sibling's.
    return { summary: `sum(${ctx.state.docs})/${ctx.state.web ?? 'no-web'}`, findings: ['summary'] };
  }
}
class ApiResearch extends Agent {
  @Step() async call(ctx: StepContext<FlowState>) {
    await sleep(5);
    await track(ctx);
    return { api: 'api', findings: ['api'] };
  }
}
class CodeGen extends Agent<{ drafts: number }> {
  override memory = { drafts: 0 };
  @Step() async generate(ctx: StepContext<FlowState>) {
    await track(ctx);
    this.memory.drafts += 1;
    return { attempts: this.memory.drafts };
  }
}
class Validate extends Agent {
  @Step({ when: (s: FlowState) => (s.files?.length ?? 0) > 0 }) async runTests(ctx: StepContext<FlowState>) {
    await track(ctx);
    return { testsPass: ctx.iteration === 2 };
  }
}
class HumanReview extends Agent {
  @Step() async review(ctx: StepContext<FlowState>) {
    await track(ctx);
    return { findings: ['reviewed'] };
  }
}
class Escalate extends Agent {
  @Step() async escalate(ctx: StepContext<FlowState>) {
    await track(ctx);
    return { escalated: true };
  }
}
class FileReviewer extends Agent<{ seen: string[] }> {
  override memory = { seen: [] as string[] };
  @Step() async review(ctx: StepContext<FlowState>) {
    inFlight += 1;
    maxInFlight = Math.max(maxInFlight, inFlight);
    await sleep(5);
    inFlight -= 1;
    await track(ctx);
    this.memory.seen.push(String(ctx.item));
    return { file: ctx.item, index: ctx.itemIndex, seenByThisAgent: this.memory.seen.length };
  }
  @Step() score() {
    return { score: 1 };
  }
}
let inFlight = 0;
let maxInFlight = 0;
class Publisher extends Agent {
  @Step() async publish(ctx: StepContext<FlowState>) {
    await track(ctx);
    return { published: `${(ctx.state.reviews ?? []).length} reviews, ${(ctx.state.findings ?? []).join(',')}` };
  }
}

let riskSelectorCalls = 0;

@Pipeline({
  name: 'flow-all',
  version: '1.0.0',
  state: FlowState,
  agents: [
    Planner,
    parallel(WebResearch, [DocsResearch, Summarizer], ApiResearch),
    loop({ until: (s: FlowState) => s.testsPass === true, maxIterations: 5 }, CodeGen, Validate),
    branch(
      (s: FlowState) => {
        riskSelectorCalls += 1;
        return s.attempts === 3 ? 'high' : 'low';
      },
      { high: [HumanReview, Escalate], low: [] },
    ),
    forEach((s: FlowState) => s.files ?? [], FileReviewer, { into: 'reviews', concurrency: 2 }),
    Publisher,
  ],
})
class FlowAll {}

const EXPECTED_STATE = {
  repo: 'r',
  files: ['a.ts', 'b.ts', 'c.ts', 'd.ts', 'e.ts'],
  findings: ['plan', 'web', 'docs', 'summary', 'api', 'reviewed'],
  web: 'web',
  docs: 'docs',
  summary: 'sum(docs)/no-web',
  api: 'api',
  attempts: 3,
  testsPass: true,
  escalated: true,
  reviews: ['a.ts', 'b.ts', 'c.ts', 'd.ts', 'e.ts'].map((file, index) => ({ file, index, seenByThisAgent: 1, score: 1 })),
  published: '5 reviews, plan,web,docs,summary,api,reviewed',
};

let storage: () => ContainerModule;
/** Options every Waypoint of the suite gets (a durability mode). */
let defaults: Omit<CreateOptions, 'modules'> = {};
const opened: Waypoint[] = [];

async function open(options: Omit<CreateOptions, 'modules'> = {}): Promise<Waypoint> {
  const waypoint = await Waypoint.create({ ...defaults, ...options, modules: [storage()], pipelines: options.pipelines ?? [] });
  opened.push(waypoint);
  return waypoint;
}

async function fresh(): Promise<Waypoint> {
  return open({ pipelines: [FlowAll] });
}

function reset(): void {
  runs = [];
  failAt = new Set();
  riskSelectorCalls = 0;
  inFlight = 0;
  maxInFlight = 0;
}

/**
 * The control-flow suite, run against one backend: `makeStorage` gives a module on a fresh database (the
 * suite's runs share it; their ids differ).
 */
export function controlFlowSuite(
  name: string,
  makeStorage: () => ContainerModule,
  cleanup: () => Promise<void> = () => Promise.resolve(),
  options: Omit<CreateOptions, 'modules'> = {},
): void {
  before(() => {
    storage = makeStorage;
    defaults = options;
  });
  after(async () => {
    for (const waypoint of opened.splice(0)) await waypoint.close();
    await cleanup();
  });
  describe(`control flow on ${name}`, () => {
    it('runs parallel, loop, branch, forEach and when to the expected state, each step once', async () => {
      reset();
      const waypoint = await fresh();
      const result = await waypoint.run<FlowState>(FlowAll, { runId: 'all', input: { repo: 'r' } });
      assert.equal(result.status, 'completed');
      assert.deepEqual({ ...result.state }, EXPECTED_STATE);
      assert.equal(new Set(runs).size, runs.length, `a step ran twice: ${runs.join(' ')}`);
      assert.ok(runs.includes('loop[2]/CodeGen/generate') && !runs.includes('loop[3]/CodeGen/generate'));
      assert.ok(runs.includes('branch[high]/HumanReview/review'));
      assert.ok(runs.includes('forEach(reviews)[4]/FileReviewer/review'));
      assert.ok(runs.includes('parallel[1]/Summarizer/summarize'));
      assert.ok(maxInFlight <= 2, `concurrency 2 was exceeded: ${maxInFlight}`);
      assert.equal(riskSelectorCalls, 1);
      // The read model replays the same tree: its state is the run's.
      const checkpoint = await waypoint.checkpoint('all');
      assert.deepEqual(checkpoint.shared_context, EXPECTED_STATE);
      // A completed run returns its recorded result without running anything.
      const again = await waypoint.run<FlowState>(FlowAll, { runId: 'all' });
      assert.equal(again.stepsExecuted, 0);
      assert.deepEqual({ ...again.state }, EXPECTED_STATE);
      assert.equal(riskSelectorCalls, 1);
    });

    it('resumes after a failure at any step with only the unfinished work, to the same state', async () => {
      const points = [
        'parallel[2]/ApiResearch/call',
        'parallel[1]/Summarizer/summarize',
        'loop[1]/Validate/runTests',
        'branch[high]/Escalate/escalate',
        'forEach(reviews)[3]/FileReviewer/review',
        'Publisher/publish',
      ];
      for (const point of points) {
        reset();
        failAt = new Set([point]);
        const waypoint = await fresh();
        const runId = `fail-${point}`;
        await assert.rejects(waypoint.run(FlowAll, { runId, input: { repo: 'r' } }), (error: unknown) => error instanceof WaypointError, point);
        assert.equal((await waypoint.get(runId))!.status, 'failed');
        const before = runs.filter((p) => p !== point);
        runs = [];
        const resumed = await waypoint.resume<FlowState>(runId);
        assert.equal(resumed.status, 'completed', point);
        assert.deepEqual({ ...resumed.state }, EXPECTED_STATE, point);
        for (const done of before) assert.ok(!runs.includes(done), `${point}: completed step ${done} ran again`);
        assert.ok(runs.includes(point), `${point}: the failed step did not run on resume`);
        assert.equal(riskSelectorCalls, 1, `${point}: the branch selector was asked again`);
      }
    });

    it('records the decisions and the skipped step, and paths are the same on every execution', async () => {
      reset();
      const waypoint = await fresh();
      await waypoint.run(FlowAll, { runId: 'paths', input: { repo: 'r' } });
      const first = [...runs];
      reset();
      await waypoint.run(FlowAll, { runId: 'paths-2', input: { repo: 'r' } });
      assert.deepEqual([...runs].sort(), [...first].sort());
      const history = await waypoint.checkpoints('paths');
      assert.ok(history.length > 20);
    });

    it('fails a parallel whose branches set the same property without a reducer, naming both', async () => {
      class A extends Agent {
        @Step() a() {
          return { web: 'a' };
        }
      }
      class B extends Agent {
        @Step() b() {
          return { web: 'b' };
        }
      }
      @Pipeline({ name: 'flow-conflict', version: '1', state: FlowState, agents: [parallel(A, B)] })
      class Conflict {}
      const waypoint = await open();
      await assert.rejects(waypoint.run(Conflict, { runId: 'c', input: { repo: 'r' } }), (error: unknown) => {
        assert.ok(error instanceof WaypointError && error.code === 'PARALLEL_CONFLICT', String(error));
        assert.match(error.message, /parallel\[0\].*parallel\[1\].*'web'/);
        return true;
      });
      assert.equal((await waypoint.get('c'))!.status, 'failed');
    });

    it('fails a loop past maxIterations with its state kept, and an unknown branch key', async () => {
      class Spin extends Agent {
        @Step() spin(ctx: StepContext<FlowState>) {
          return { attempts: (ctx.state.attempts ?? 0) + 1 };
        }
      }
      @Pipeline({ name: 'flow-spin', version: '1', state: FlowState, agents: [loop({ until: () => false, maxIterations: 3 }, Spin)] })
      class Spinning {}
      @Pipeline({ name: 'flow-unknown', version: '1', state: FlowState, agents: [branch(() => 'nope', { yes: Spin })] })
      class Unknown {}
      const waypoint = await open();
      await assert.rejects(waypoint.run(Spinning, { runId: 'spin', input: { repo: 'r' } }), { code: 'LOOP_LIMIT' });
      const kept = await waypoint.checkpoint('spin');
      assert.equal(kept.shared_context.attempts, 3);
      assert.equal((await waypoint.get('spin'))!.status, 'failed');
      await assert.rejects(waypoint.run(Unknown, { runId: 'unknown', input: { repo: 'r' } }), { code: 'UNKNOWN_BRANCH' });
    });

    it('runs parallel branches concurrently: every branch has a step in flight at once', async () => {
      let inFlightNow = 0;
      let most = 0;
      const slow = (name: string) => {
        class Slow extends Agent {
          static agentId = name;
          @Step() async s1() {
            inFlightNow += 1;
            most = Math.max(most, inFlightNow);
            await sleep(60);
            inFlightNow -= 1;
            return {};
          }
          @Step() async s2() {
            await sleep(10);
            return {};
          }
        }
        return Slow;
      };
      @Pipeline({ name: 'flow-wall', version: '1', agents: [parallel(slow('p1'), slow('p2'), slow('p3'), slow('p4'))] })
      class Wall {}
      const waypoint = await open();
      await waypoint.run(Wall, { runId: 'wall', input: {} });
      // Run one after another, at most one first step would be in flight; the wall-time ratio is in `npm run bench -- --only flow`.
      assert.equal(most, 4);
    });

    it('gives each forEach item and loop iteration its own side-effect keys, stable across a resume', async () => {
      const keys: string[] = [];
      let failOnce = true;
      class Mailer extends Agent {
        @SideEffect() send(to: unknown): Promise<void> {
          keys.push(`${String(to)}:${currentOperation().key}`);
          return Promise.resolve();
        }
        @Step() async mail(ctx: StepContext<FlowState>) {
          await this.send(ctx.item);
          if (ctx.itemIndex === 1 && failOnce) {
            failOnce = false;
            throw new NonRetryableError('after the side effect');
          }
          return { sent: true };
        }
      }
      @Pipeline({ name: 'flow-mail', version: '1', state: FlowState, agents: [forEach((s: FlowState) => s.files ?? [], Mailer, { into: 'reviews' })] })
      class Mail {}
      const waypoint = await open({ pipelines: [Mail] });
      await assert.rejects(waypoint.run(Mail, { runId: 'mail', input: { repo: 'r', files: ['x', 'y', 'z'] } }));
      await waypoint.resume('mail');
      // x and y sent once each (y's effect is reused on the re-run of its step), z once; the keys differ per item.
      const byItem = new Map<string, Set<string>>();
      for (const entry of keys) {
        const [to, key] = entry.split(':');
        byItem.set(to, (byItem.get(to) ?? new Set()).add(key));
      }
      assert.deepEqual([...byItem.keys()].sort(), ['x', 'y', 'z']);
      assert.equal(new Set(keys.map((k) => k.split(':')[1])).size, 3);
      assert.equal(keys.filter((k) => k.startsWith('y:')).length, 1, 'the committed side effect of item 1 ran again');
    });

    it('runs a @Pipeline per forEach item as child runs, listed under the parent', async () => {
      class CustomerState {
        @IsOptional() @IsString() name?: string;
        @IsOptional() report?: string;
      }
      class Reporter extends Agent {
        @Step() report(ctx: StepContext<CustomerState>) {
          return { report: `report for ${ctx.state.name ?? String(ctx.item)} #${ctx.itemIndex}` };
        }
      }
      @Pipeline({ name: 'customer-report', version: '1', state: CustomerState, agents: [Reporter] })
      class CustomerReport {}
      class Parent {
        @IsOptional() customers?: unknown[];
        @IsOptional() reports?: unknown[];
      }
      @Pipeline({ name: 'flow-parent', version: '1', state: Parent, agents: [forEach((s: Parent) => s.customers ?? [], CustomerReport, { into: 'reports', concurrency: 2 })] })
      class ParentPipeline {}
      const waypoint = await open({ pipelines: [ParentPipeline] });
      const result = await waypoint.run<Parent>(ParentPipeline, { runId: 'parent', input: { customers: [{ name: 'ada' }, 'bob'] } });
      assert.equal(result.status, 'completed');
      assert.deepEqual(result.state.reports, [{ name: 'ada', report: 'report for ada #0' }, { report: 'report for bob #1' }]);
      const child = await waypoint.get('parent/reports/1');
      assert.equal(child?.status, 'completed');
      assert.equal(child?.pipeline, 'customer-report');
      const children = await waypoint.list({ parentRunId: 'parent' });
      assert.deepEqual(children.map((c) => c.runId).sort(), ['parent/reports/0', 'parent/reports/1']);
      const checkpoint = await waypoint.checkpoint('parent');
      assert.deepEqual(checkpoint.shared_context.reports, result.state.reports);
    });
  });

  describe(`control flow on ${name}: pause, wait and fork inside constructs`, () => {
    it('pauses mid-parallel and mid-forEach on a stop and resumes with only the rest', async () => {
      // The stop comes when the Nth step starts (not after a time): mid-parallel, and twice mid-forEach.
      let stopAt = 0;
      let stop = new AbortController();
      const started = (ctx: StepContext) => {
        runs.push(ctx.path);
        if (runs.length === stopAt) stop.abort();
      };
      class Slow extends Agent {
        static agentId = 'slow';
        @Step() async one(ctx: StepContext) {
          started(ctx);
          await sleep(40);
          return {};
        }
        @Step() async two(ctx: StepContext) {
          started(ctx);
          await sleep(40);
          return {};
        }
      }
      class Quick extends Agent {
        static agentId = 'quick';
        @Step() async go(ctx: StepContext) {
          started(ctx);
          await sleep(15);
          return { done: ctx.itemIndex };
        }
      }
      @Pipeline({
        name: 'flow-pause',
        version: '1',
        agents: [parallel(Slow, [Quick]), forEach(() => [1, 2, 3, 4, 5, 6, 7, 8], Quick, { into: 'out', concurrency: 2, name: 'items' })],
      })
      class Pausing {}
      for (const stopAfter of [2, 5, 9]) {
        runs = [];
        stopAt = stopAfter;
        stop = new AbortController();
        const waypoint = await open({ pipelines: [Pausing] });
        const first = await waypoint.run(Pausing, { runId: `pause-${stopAfter}`, input: {}, signal: stop.signal, gracePeriodMs: 1000 });
        assert.equal(first.status, 'paused', `stop at step start ${stopAfter}`);
        const before = [...runs];
        runs = [];
        const rest = await waypoint.resume<{ out: unknown[] }>(`pause-${stopAfter}`);
        assert.equal(rest.status, 'completed');
        assert.deepEqual(
          rest.state.out,
          [0, 1, 2, 3, 4, 5, 6, 7].map((i) => ({ done: i })),
        );
        for (const done of before) assert.ok(!runs.includes(done), `stop at step start ${stopAfter}: ${done} ran again`);
        assert.equal(before.length + runs.length, 2 + 1 + 8, `stop at step start ${stopAfter}: ${before.join(' ')} | ${runs.join(' ')}`);
      }
    });

    it('retries, per-attempt timeouts and a durable sleep work inside a parallel branch, a loop and a forEach item', async () => {
      const attempts = new Map<string, number>();
      const count = (ctx: StepContext) => attempts.set(ctx.path, (attempts.get(ctx.path) ?? 0) + 1).get(ctx.path)!;
      class Flaky extends Agent {
        @Step({ retries: { maxAttempts: 3, initialDelayMs: 5, jitter: false } }) call(ctx: StepContext) {
          if (count(ctx) < 3) return Promise.reject(new Error(`503 on attempt ${attempts.get(ctx.path)}`));
          return { flaky: attempts.get(ctx.path) };
        }
      }
      class Hangs extends Agent {
        @Step({ timeoutMs: 40, retries: { maxAttempts: 2, initialDelayMs: 5, jitter: false } }) async slow(ctx: StepContext) {
          if (count(ctx) === 1) await new Promise((resolve) => setTimeout(resolve, 5_000).unref());
          return { hung: attempts.get(ctx.path) };
        }
      }
      class Napper extends Agent {
        @Step() async nap(ctx: StepContext<{ naps?: number }>) {
          count(ctx);
          await ctx.sleep(30);
          return { naps: (ctx.state.naps ?? 0) + 1 };
        }
      }
      @Pipeline({
        name: 'flow-retry',
        version: '1',
        agents: [
          parallel(Flaky, Hangs),
          loop({ until: (s: { naps?: number }) => (s.naps ?? 0) >= 2, maxIterations: 3 }, Napper),
          forEach(() => ['x', 'y'], [Flaky], { into: 'items', concurrency: 2 }),
        ],
      })
      class Retrying {}
      const waypoint = await open({ pipelines: [Retrying] });
      const result = await waypoint.run<Record<string, unknown>>(Retrying, { runId: 'retry-in-flow', input: {} });
      assert.equal(result.status, 'completed');
      assert.equal(result.state.flaky, 3);
      assert.equal(result.state.hung, 2, 'the timed-out attempt was retried');
      assert.equal(result.state.naps, 2);
      assert.deepEqual(result.state.items, [{ flaky: 3 }, { flaky: 3 }]);
      assert.deepEqual([...attempts].sort(), [
        ['forEach(items)[0]/Flaky/call', 3],
        ['forEach(items)[1]/Flaky/call', 3],
        ['loop[0]/Napper/nap', 1],
        ['loop[1]/Napper/nap', 1],
        ['parallel[0]/Flaky/call', 3],
        ['parallel[1]/Hangs/slow', 2],
      ]);
    });

    it('waits for a signal inside a forEach item and continues there after it', async () => {
      class Approver extends Agent {
        @Step() async approve(ctx: StepContext) {
          if (ctx.itemIndex === 1) return { ok: await ctx.waitFor<string>('approval') };
          return { ok: 'auto' };
        }
      }
      @Pipeline({ name: 'flow-wait', version: '1', agents: [forEach(() => ['a', 'b', 'c'], Approver, { into: 'approvals' })] })
      class Waiting {}
      const waypoint = await open({ pipelines: [Waiting] });
      const first = await waypoint.run(Waiting, { runId: 'wait', input: {} });
      assert.equal(first.status, 'waiting');
      await waypoint.signal('wait', 'approval', 'yes');
      const done = await waypoint.resume<{ approvals: unknown[] }>('wait');
      assert.equal(done.status, 'completed');
      assert.deepEqual(done.state.approvals, [{ ok: 'auto' }, { ok: 'yes' }, { ok: 'auto' }]);
    });

    it('forks from a step inside a loop iteration and re-runs from there', async () => {
      reset();
      const waypoint = await fresh();
      await waypoint.run(FlowAll, { runId: 'fork-src', input: { repo: 'r' } });
      await waypoint.fork('fork-src', { newRunId: 'fork-dst', fromStep: 'loop[1]/CodeGen/generate' });
      runs = [];
      const forked = await waypoint.resume<FlowState>('fork-dst');
      assert.equal(forked.status, 'completed');
      assert.deepEqual({ ...forked.state }, EXPECTED_STATE);
      assert.equal(runs[0], 'loop[1]/CodeGen/generate');
      assert.ok(!runs.includes('loop[0]/CodeGen/generate') && !runs.includes('Planner/plan'));
    });

    it('forks with a state patch that applies where the forked step runs (its branch), and before a failed step', async () => {
      reset();
      const waypoint = await fresh();
      await waypoint.run(FlowAll, { runId: 'patch-src', input: { repo: 'r' } });
      // The patch reaches the Summarizer in its branch, and through the join the whole run.
      await waypoint.fork('patch-src', { newRunId: 'patch-dst', fromStep: 'parallel[1]/Summarizer/summarize', patchState: { docs: 'patched' } });
      runs = [];
      const forked = await waypoint.resume<FlowState>('patch-dst');
      assert.equal(forked.status, 'completed');
      assert.deepEqual({ ...forked.state }, { ...EXPECTED_STATE, docs: 'patched', summary: 'sum(patched)/no-web' });
      assert.ok(runs.includes('parallel[1]/Summarizer/summarize') && !runs.includes('Planner/plan') && !runs.includes('parallel[1]/DocsResearch/read'), runs.join(' '));
      // The read model replays the patch at the same place.
      assert.deepEqual((await waypoint.checkpoint('patch-dst')).shared_context, forked.state);
      // At the end of a completed run there is no step to patch before.
      await assert.rejects(waypoint.fork('patch-src', { newRunId: 'patch-end', patchState: { repo: 'x' } }), { code: 'FORK_PATCH_NO_STEP' });

      // A failed run: fork at its end with the patch for the step that failed, which has no row.
      reset();
      failAt = new Set(['forEach(reviews)[3]/FileReviewer/review']);
      await assert.rejects(waypoint.run(FlowAll, { runId: 'patch-failed', input: { repo: 'r' } }), { code: 'ITEM_FAILED' });
      await waypoint.fork('patch-failed', { newRunId: 'patch-fixed', patchState: { repo: 'fixed' }, patchBefore: 'forEach(reviews)[3]/FileReviewer/review' });
      runs = [];
      const fixed = await waypoint.resume<FlowState>('patch-fixed');
      assert.equal(fixed.status, 'completed');
      // The patch lands in item 3's own updates (an item's updates reach the state only through `into`).
      const reviews = EXPECTED_STATE.reviews.map((review, i) => (i === 3 ? { repo: 'fixed', ...review } : review));
      assert.deepEqual({ ...fixed.state }, { ...EXPECTED_STATE, reviews });
      assert.ok(!runs.includes('Planner/plan') && runs.includes('forEach(reviews)[3]/FileReviewer/review'), runs.join(' '));
    });

    it('folds a control-flow run at top-level boundaries with compactEvery, and resumes and reads it the same', async () => {
      reset();
      failAt = new Set(['forEach(reviews)[3]/FileReviewer/review']);
      const waypoint = await open({ pipelines: [FlowAll], retention: { compactEvery: 2, keepLast: 2 } });
      await assert.rejects(waypoint.run(FlowAll, { runId: 'compact-flow', input: { repo: 'r' } }), { code: 'ITEM_FAILED' });
      const rows = await waypoint.store.listSteps('compact-flow');
      const base = rows[0];
      assert.equal(base.stepName, 'base', 'the oldest rows were not folded');
      const payload = JSON.parse(base.output) as { flow: { done: number; doneKeys: string[] } };
      // Folded at a top-level boundary: the planner, the parallel, and the loop and branch at least.
      assert.ok(payload.flow.done >= 3, JSON.stringify(payload.flow));
      assert.ok(!rows.some((row) => row.path?.startsWith('parallel[')), 'rows of the folded parallel are still stored');
      const before = runs.filter((p) => p !== 'forEach(reviews)[3]/FileReviewer/review');
      runs = [];
      const resumed = await waypoint.resume<FlowState>('compact-flow');
      assert.equal(resumed.status, 'completed');
      assert.deepEqual({ ...resumed.state }, EXPECTED_STATE);
      for (const done of before) assert.ok(!runs.includes(done), `completed step ${done} ran again after the fold`);
      assert.equal(riskSelectorCalls, 1);
      assert.deepEqual((await waypoint.checkpoint('compact-flow')).shared_context, EXPECTED_STATE);
      const again = await waypoint.run<FlowState>(FlowAll, { runId: 'compact-flow' });
      assert.deepEqual({ ...again.state }, EXPECTED_STATE);
      // A long top-level loop folds between its iterations.
      class Count extends Agent<{ n: number }> {
        override memory = { n: 0 };
        @Step() tick(ctx: StepContext<{ total?: number }>) {
          this.memory.n += 1;
          return { total: (ctx.state.total ?? 0) + 1, seen: this.memory.n };
        }
      }
      @Pipeline({ name: 'flow-long-loop', version: '1', agents: [loop({ until: (s: { total?: number }) => (s.total ?? 0) >= 30, maxIterations: 50 }, Count)] })
      class LongLoop {}
      const looping = await open({ pipelines: [LongLoop], retention: { compactEvery: 5, keepLast: 3 } });
      const done = await looping.run<{ total: number; seen: number }>(LongLoop, { runId: 'long-loop', input: {} });
      assert.deepEqual({ total: done.state.total, seen: done.state.seen }, { total: 30, seen: 30 });
      const kept = await looping.store.listSteps('long-loop');
      assert.ok(kept.length < 20, `a 30-iteration loop kept ${kept.length} rows`);
      assert.deepEqual((await looping.checkpoint('long-loop')).shared_context, { total: 30, seen: 30 });
    });

    it('migrates a control-flow run to a new version: paths renamed, outputs rewritten, nothing re-run', async () => {
      reset();
      failAt = new Set(['forEach(reviews)[3]/FileReviewer/review']);
      const waypoint = await fresh();
      await assert.rejects(waypoint.run(FlowAll, { runId: 'migrate-flow', input: { repo: 'r' } }), { code: 'ITEM_FAILED' });
      const before = runs.filter((p) => p !== 'forEach(reviews)[3]/FileReviewer/review');
      const shape = (version: string, migrations: import('../../src/index').CheckpointMigration[]) => {
        @Pipeline({
          name: 'flow-all',
          version,
          state: FlowState,
          migrations,
          agents: [
            Planner,
            parallel(WebResearch, [DocsResearch, Summarizer], ApiResearch),
            loop({ until: (s: FlowState) => s.testsPass === true, maxIterations: 5, name: 'refine' }, CodeGen, Validate),
            branch((s: FlowState) => (riskSelectorCalls++, s.attempts === 3 ? 'high' : 'low'), { high: [HumanReview, Escalate], low: [] }),
            forEach((s: FlowState) => s.files ?? [], FileReviewer, { into: 'reviews', concurrency: 2 }),
            Publisher,
          ],
        })
        class FlowAllV2 {}
        return FlowAllV2;
      };
      // No migration registered: the typed error, nothing written.
      waypoint.register(shape('2.0.0', []));
      await assert.rejects(waypoint.resume('migrate-flow'), { code: 'VERSION_MISMATCH' });
      // A migration that leaves the loop's old paths: they have no place in 2.0.0.
      waypoint.register(shape('2.0.0', [{ from: '1.0.0', to: '2.0.0', migrate: (c) => c }]));
      await assert.rejects(waypoint.resume('migrate-flow'), { code: 'PLAN_MISMATCH' });
      const rename = (path: string) => path.replace(/^loop\[/, 'refine[').replace(/^loop\//, 'refine/');
      waypoint.register(
        shape('2.0.0', [
          {
            from: '1.x',
            to: '2.0.0',
            migrate: (c) => ({
              state: c.state,
              memories: Object.fromEntries(Object.entries(c.memories).map(([id, m]) => [rename(id), m])),
              completedSteps: c.completedSteps.map(rename),
              outputs: Object.fromEntries(Object.entries(c.outputs ?? {}).map(([path, out]) => [rename(path), 'web' in out ? { ...out, web: 'WEB' } : out])),
              decisions: Object.fromEntries(Object.entries(c.decisions ?? {}).map(([path, value]) => [rename(path), value])),
            }),
          },
        ]),
      );
      runs = [];
      const resumed = await waypoint.resume<FlowState>('migrate-flow');
      assert.equal(resumed.status, 'completed');
      assert.deepEqual({ ...resumed.state }, { ...EXPECTED_STATE, web: 'WEB' });
      for (const done of before) assert.ok(!runs.includes(done), `completed step ${done} ran again after the migration`);
      assert.ok(runs.includes('forEach(reviews)[3]/FileReviewer/review'));
      assert.equal(riskSelectorCalls, 1, 'the branch selector was asked again');
      assert.equal((await waypoint.get('migrate-flow'))!.version, '2.0.0');
      // Read back under 2.0.0: the migrated base row and the rows after it replay to the same state.
      assert.deepEqual((await waypoint.checkpoint('migrate-flow')).shared_context, { ...EXPECTED_STATE, web: 'WEB' });
    });
  });

  describe(`control flow on ${name}: sealed, encrypted, cancelled`, () => {
    it('seals and encrypts every row of a control-flow run, and resumes it after a failure', async () => {
      reset();
      failAt = new Set(['forEach(reviews)[2]/FileReviewer/review']);
      const keys = { encryption: { keys: { k1: Buffer.alloc(32, 7) }, activeKeyId: 'k1' }, hmacKey: 'flow-secret' };
      const sealed = await open({ pipelines: [FlowAll], ...keys });
      await assert.rejects(sealed.run(FlowAll, { runId: 'sealed', input: { repo: 'r' } }), { code: 'ITEM_FAILED' });
      const resumed = await sealed.resume<FlowState>('sealed');
      assert.deepEqual({ ...resumed.state }, EXPECTED_STATE);
      assert.deepEqual((await sealed.checkpoint('sealed')).shared_context, EXPECTED_STATE);
      // Without the keys nothing of it can be read.
      const plain = await open({ pipelines: [FlowAll] });
      await assert.rejects(plain.checkpoint('sealed'));
    });

    it('a cancel while a forEach runs stops it at its next write and starts no new item', async () => {
      let started = 0;
      class Slow extends Agent {
        @Step() async work(ctx: StepContext) {
          started += 1;
          await sleep(30);
          return { i: ctx.itemIndex };
        }
      }
      @Pipeline({ name: 'flow-cancel', version: '1', agents: [forEach(() => Array.from({ length: 40 }, (_, i) => i), Slow, { into: 'out', concurrency: 3 })] })
      class Cancelled {}
      const runner = await open({ pipelines: [Cancelled] });
      // The rejection is awaited from the start: the run may end before the cancel call returns (seen on Redis).
      const ended = assert.rejects(runner.run(Cancelled, { runId: 'cancel-me', input: {} }), { code: 'RUN_CANCELLED' });
      await sleep(150);
      await runner.cancel('cancel-me', 'test');
      await ended;
      const after = (await runner.get('cancel-me'))!;
      assert.equal(after.status, 'cancelled');
      const startedThen = started;
      await sleep(150);
      assert.equal(started, startedThen, 'items kept starting after the cancel');
      assert.ok(startedThen < 40);
    });
  });

  describe(`control flow on ${name}: nested child runs`, () => {
    it('gives the child runs of a forEach nested in another forEach ids of their own', async () => {
      class Echo extends Agent {
        @Step() echo(ctx: StepContext) {
          return { echoed: `${String(ctx.item)}` };
        }
      }
      @Pipeline({ name: 'flow-echo', version: '1', agents: [Echo] })
      class EchoPipeline {}
      class Tag extends Agent {
        @Step() tag(ctx: StepContext) {
          return { tag: ctx.item };
        }
      }
      @Pipeline({
        name: 'flow-nested-children',
        version: '1',
        agents: [forEach(() => ['a', 'b'], [Tag, forEach(() => [1, 2], EchoPipeline, { into: 'inner' })], { into: 'outer' })],
      })
      class Nested {}
      const waypoint = await open({ pipelines: [Nested] });
      const result = await waypoint.run<{ outer: unknown[] }>(Nested, { runId: 'nested', input: {} });
      assert.equal(result.status, 'completed');
      const child = { echoed: '1' };
      const other = { echoed: '2' };
      assert.deepEqual(result.state.outer, [
        { tag: 'a', inner: [child, other] },
        { tag: 'b', inner: [child, other] },
      ]);
      const children = (await waypoint.list({ parentRunId: 'nested' })).map((c) => c.runId).sort();
      assert.deepEqual(children, ['nested/forEach(outer)[0]/inner/0', 'nested/forEach(outer)[0]/inner/1', 'nested/forEach(outer)[1]/inner/0', 'nested/forEach(outer)[1]/inner/1']);
    });
  });

  describe(`control flow on ${name}: a changed shape under the same version`, () => {
    it('refuses to resume a run whose recorded steps have no place in the pipeline any more', async () => {
      class Old extends Agent {
        @Step() work() {
          return {};
        }
      }
      class Other extends Agent {
        @Step() work() {
          return {};
        }
      }
      @Pipeline({ name: 'flow-shape', version: '1', agents: [parallel(Old, Other), Other] })
      class Before {}
      const waypoint = await open();
      await assert.rejects(
        waypoint.run(Before, { runId: 'shape', input: {} }).then(async () => {
          @Pipeline({ name: 'flow-shape', version: '1', agents: [loop({ until: () => true }, Old), Other] })
          class After {}
          await waypoint.run(After, { runId: 'shape', input: {} });
        }),
        (error: unknown) => error instanceof WaypointError && error.code === 'PLAN_MISMATCH' && /parallel\[0\]\/Old\/work/.test(error.message),
      );
    });
  });
}
