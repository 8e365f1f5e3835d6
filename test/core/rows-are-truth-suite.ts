import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { IsOptional, IsString } from 'class-validator';
import type { ContainerModule } from 'inversify';
import { Agent, branch, forEach, loop, parallel, Pipeline, Reducer, Step, Waypoint, type CreateOptions, type StepContext } from '../../src/index';
import { SYSTEM_AGENT } from '../../src/core/history/row-integrity';

/*
 * "The rows are the truth" (issue 36): a Waypoint that registered no pipeline reads every checkpoint of a
 * control-flow run from the rows alone (forEach `into` with concurrency, a parallel whose branches both set
 * reducer properties, loops and a branch on the run's frame, a `when` skip, constructs nested in a loop and
 * in a parallel, a forEach over a child @Pipeline), and gets at each the state the registered Waypoint
 * gives by replaying the run through its code. Before join and merge rows, the pipeline-less read lacked
 * every `into`, folded item and branch outputs into the run's state, and merged no reducer.
 */

const concat = (a: string[] = [], b: string[] = []) => [...a, ...b];
const sum = (a = 0, b = 0) => a + b;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

class TruthState {
  @IsString() topic!: string;
  @IsOptional() @Reducer(concat) notes?: string[];
  @IsOptional() @Reducer(sum) total?: number;
  @IsOptional() items?: string[];
  @IsOptional() left?: string;
  @IsOptional() right?: string;
  @IsOptional() rounds?: number;
  @IsOptional() passes?: number;
  @IsOptional() chosen?: string;
  @IsOptional() kept?: boolean;
  @IsOptional() skipped?: boolean;
  @IsOptional() reviews?: unknown[];
  @IsOptional() inner?: unknown[];
  @IsOptional() deep?: unknown[];
  @IsOptional() side?: string;
  @IsOptional() done?: string;
}

class Start extends Agent {
  @Step() start() {
    return { items: ['a', 'b', 'c', 'd'], notes: ['start'], total: 1 };
  }
}
class Left extends Agent {
  @Step() async left() {
    await sleep(15);
    return { left: 'L', notes: ['left'], total: 10 };
  }
}
class Right extends Agent {
  @Step() async right() {
    await sleep(2);
    return { right: 'R', notes: ['right'], total: 100 };
  }
  @Step() again() {
    return { notes: ['right-again'], total: 1000 };
  }
}
class Round extends Agent {
  @Step() round(ctx: StepContext<TruthState>) {
    const n = (ctx.state.rounds ?? 0) + 1;
    return { rounds: n, notes: [`round${n}`], total: n };
  }
}
class Chosen extends Agent {
  @Step() choose() {
    return { chosen: 'yes', notes: ['chosen'] };
  }
}
class Maybe extends Agent {
  @Step({ when: () => false }) skip() {
    return { skipped: true, notes: ['never'] };
  }
  @Step() keep() {
    return { kept: true };
  }
}
class Reviewer extends Agent {
  @Step() async review(ctx: StepContext<TruthState>) {
    await sleep(ctx.itemIndex === 0 ? 12 : 3);
    return { file: ctx.item, notes: [`review-${String(ctx.item)}`], total: 1 };
  }
  @Step() score(ctx: StepContext<TruthState>) {
    return { score: ctx.itemIndex, notes: ['scored'] };
  }
}
class Pass extends Agent {
  @Step() pass(ctx: StepContext<TruthState>) {
    return { passes: (ctx.state.passes ?? 0) + 1, notes: ['pass'] };
  }
}
class Inner extends Agent {
  @Step() async inner(ctx: StepContext<TruthState>) {
    await sleep(ctx.itemIndex === 0 ? 6 : 1);
    return { seen: `${String(ctx.item)}@${ctx.iteration ?? '-'}`, total: 2 };
  }
}
class Side extends Agent {
  @Step() side() {
    return { side: 'S', notes: ['side'] };
  }
}
class Finish extends Agent {
  @Step() finish(ctx: StepContext<TruthState>) {
    return { done: `${(ctx.state.notes ?? []).length} notes, total ${ctx.state.total ?? 0}` };
  }
}

@Pipeline({
  name: 'rows-truth',
  version: '1.0.0',
  state: TruthState,
  agents: [
    Start,
    parallel(Left, Right),
    loop({ until: (s: TruthState) => (s.rounds ?? 0) >= 3, maxIterations: 5 }, Round),
    branch((s: TruthState) => (s.rounds === 3 ? 'yes' : 'no'), { yes: [Chosen], no: [] }),
    Maybe,
    forEach((s: TruthState) => s.items ?? [], Reviewer, { into: 'reviews', concurrency: 2 }),
    loop(
      { until: (s: TruthState) => (s.passes ?? 0) >= 2, maxIterations: 3 },
      Pass,
      forEach(() => ['x', 'y'], Inner, { into: 'inner', concurrency: 2 }),
    ),
    parallel(
      forEach(() => ['p', 'q', 'r'], Inner, { into: 'deep', concurrency: 3 }),
      Side,
    ),
    Finish,
  ],
})
class RowsTruth {}

class CustomerState {
  @IsOptional() @IsString() name?: string;
  @IsOptional() report?: string;
}
class CustomerReporter extends Agent {
  @Step() async report(ctx: StepContext<CustomerState>) {
    await sleep(ctx.itemIndex === 0 ? 8 : 1);
    return { report: `report for ${ctx.state.name ?? String(ctx.item)} #${ctx.itemIndex}` };
  }
}
@Pipeline({ name: 'rows-truth-customer', version: '1', state: CustomerState, agents: [CustomerReporter] })
class CustomerReport {}

class ParentState {
  @IsOptional() customers?: unknown[];
  @IsOptional() reports?: unknown[];
  @IsOptional() @Reducer(concat) notes?: string[];
  @IsOptional() count?: number;
}
class Count extends Agent {
  @Step() count(ctx: StepContext<ParentState>) {
    return { count: (ctx.state.reports ?? []).length, notes: ['counted'] };
  }
}
@Pipeline({
  name: 'rows-truth-parent',
  version: '1',
  state: ParentState,
  agents: [forEach((s: ParentState) => s.customers ?? [], CustomerReport, { into: 'reports', concurrency: 2 }), Count],
})
class RowsTruthParent {}

/** A growing list, a growing map and a counter through reducers: what a chat loop keeping its messages in the state does. */
class GrowingState {
  @IsString() topic!: string;
  @IsOptional() @Reducer(concat) log?: string[];
  @IsOptional() @Reducer((a: Record<string, number> = {}, b: Record<string, number> = {}) => ({ ...a, ...b })) seen?: Record<string, number>;
  @IsOptional() @Reducer(sum) total?: number;
  @IsOptional() rounds?: number;
}

const GROWING_ROUNDS = 40;

class Grow extends Agent {
  @Step() grow(ctx: StepContext<GrowingState>) {
    const round = (ctx.state.rounds ?? 0) + 1;
    // Round 20 also changes an entry an earlier round added: its merge row records the changed entry.
    return { rounds: round, log: [`entry ${round} `.padEnd(200, '.')], seen: round === 20 ? { k1: 999, k20: 20 } : { [`k${round}`]: round }, total: round };
  }
}

@Pipeline({
  name: 'rows-truth-growing',
  version: '1',
  state: GrowingState,
  agents: [loop<GrowingState>({ until: (s) => (s.rounds ?? 0) >= GROWING_ROUNDS, maxIterations: 100 }, Grow)],
})
class RowsTruthGrowing {}

/** Every checkpoint of `runId` as the registered Waypoint (replaying) and the bare one (folding) give it. */
async function compareEveryCheckpoint(registered: Waypoint, bare: Waypoint, runId: string): Promise<number> {
  const replayed = await registered.checkpoints(runId);
  const folded = await bare.checkpoints(runId);
  assert.deepEqual(
    folded.map((c) => c.checkpoint_sequence),
    replayed.map((c) => c.checkpoint_sequence),
  );
  for (let i = 0; i < replayed.length; i++) {
    assert.deepEqual(folded[i].shared_context, replayed[i].shared_context, `run '${runId}' at sequence ${replayed[i].checkpoint_sequence}`);
    assert.deepEqual(
      (await bare.checkpoint(runId, replayed[i].checkpoint_sequence)).shared_context,
      replayed[i].shared_context,
      `checkpoint(runId, ${replayed[i].checkpoint_sequence})`,
    );
  }
  return replayed.length;
}

/** Rows of `runId` by their `$waypoint` kind. */
async function systemRows(waypoint: Waypoint, runId: string, kind: string): Promise<string[]> {
  const loaded = await waypoint.store.loadRun(runId);
  return loaded!.steps.filter((row) => row.agentId === SYSTEM_AGENT && row.stepName === kind).map((row) => row.path ?? '');
}

/**
 * The suite against one backend: `makeStorage` gives a module on the backend's store; the two Waypoints of
 * a test open it twice (one store, as two services would).
 */
export function rowsAreTruthSuite(name: string, makeStorage: () => ContainerModule, cleanup: () => Promise<void> = () => Promise.resolve()): void {
  const opened: Waypoint[] = [];
  const open = async (pipelines: NonNullable<CreateOptions['pipelines']>): Promise<Waypoint> => {
    const waypoint = await Waypoint.create({ modules: [makeStorage()], pipelines });
    opened.push(waypoint);
    return waypoint;
  };
  let registered: Waypoint;
  let bare: Waypoint;
  before(async () => {
    registered = await open([RowsTruth, RowsTruthParent, CustomerReport, RowsTruthGrowing]);
    bare = await open([]);
  });
  after(async () => {
    for (const waypoint of opened.splice(0)) await waypoint.close();
    await cleanup();
  });

  describe(`the rows are the truth on ${name}: a Waypoint without the pipeline reads every checkpoint as the run had it`, () => {
    it('parallel with reducers set by both branches, loops, a branch, a when skip, forEach into (concurrency 2), nested constructs', async () => {
      const result = await registered.run<TruthState>(RowsTruth, { runId: 'truth', input: { topic: 't' } });
      assert.equal(result.status, 'completed');
      assert.deepEqual(result.state.notes?.slice(0, 4), ['start', 'left', 'right', 'right-again']);
      // Items' totals land in their `into` entries, not in the run's total.
      assert.equal(result.state.total, 1 + 10 + 100 + 1000 + (1 + 2 + 3));
      const count = await compareEveryCheckpoint(registered, bare, 'truth');
      assert.ok(count > 40, `${count} checkpoints`);
      assert.deepEqual((await bare.checkpoint('truth')).shared_context, { ...result.state });
      assert.deepEqual(
        (await systemRows(registered, 'truth', 'join')).sort(),
        ['forEach(reviews)#join', 'loop#2[0]/forEach(inner)#join', 'loop#2[1]/forEach(inner)#join', 'parallel#2[0]/forEach(deep)#join', 'parallel#2#join', 'parallel#join'].sort(),
      );
      // Only steps on the run's own frame that reach a reducer have a merge row; items' and branches' come in their joins.
      assert.deepEqual(await systemRows(registered, 'truth', 'merge'), [
        'Start/start#merge',
        'loop[0]/Round/round#merge',
        'loop[1]/Round/round#merge',
        'loop[2]/Round/round#merge',
        'branch[yes]/Chosen/choose#merge',
        'loop#2[0]/Pass/pass#merge',
        'loop#2[1]/Pass/pass#merge',
      ]);
    });

    it('a forEach over a child @Pipeline (concurrency 2): the parent reads its into without the child pipelines', async () => {
      const result = await registered.run<ParentState>(RowsTruthParent, { runId: 'truth-parent', input: { customers: [{ name: 'ada' }, 'bob', { name: 'cy' }] } });
      assert.equal(result.status, 'completed');
      assert.equal(result.state.count, 3);
      await compareEveryCheckpoint(registered, bare, 'truth-parent');
      assert.deepEqual((await bare.checkpoint('truth-parent')).shared_context.reports, result.state.reports);
      for (const child of ['truth-parent/reports/0', 'truth-parent/reports/1', 'truth-parent/reports/2']) await compareEveryCheckpoint(registered, bare, child);
    });

    it('reducer values that grow every step: merge rows hold what each step added, and the bare read folds them exactly', async () => {
      const result = await registered.run<GrowingState>(RowsTruthGrowing, { runId: 'truth-growing', input: { topic: 't' } });
      assert.equal(result.status, 'completed');
      assert.equal(result.state.log?.length, GROWING_ROUNDS);
      assert.equal(result.state.total, (GROWING_ROUNDS * (GROWING_ROUNDS + 1)) / 2);
      assert.equal(Object.keys(result.state.seen ?? {}).length, GROWING_ROUNDS);
      assert.equal(result.state.seen?.k1, 999);
      await compareEveryCheckpoint(registered, bare, 'truth-growing');
      const merges = (await registered.store.loadRun('truth-growing'))!.steps.filter((row) => row.agentId === SYSTEM_AGENT && row.stepName === 'merge');
      assert.equal(merges.length, GROWING_ROUNDS);
      // Flat: the last merge row is about the size of the second (a 40-item list of 200 B items would be 8 KB).
      const sizes = merges.map((row) => row.output.length);
      assert.ok(sizes[GROWING_ROUNDS - 1] < sizes[1] + 100, `merge rows grew: ${sizes.join(', ')}`);
      // Round 20's row holds its two entries (one of them changed), not the 19 it kept.
      assert.ok(merges[19].output.includes('999') && !merges[19].output.includes('k19'), merges[19].output);
    });

    it('a run stopped inside a forEach reads the same from both, and its resume completes it as the rows say', async () => {
      let stops = 1;
      const stop = new AbortController();
      class Stopper extends Agent {
        @Step() async look(ctx: StepContext<TruthState>) {
          if (ctx.itemIndex === 2 && stops-- > 0) stop.abort();
          await sleep(1);
          return { file: ctx.item, notes: [`look-${String(ctx.item)}`], total: 1 };
        }
      }
      @Pipeline({
        name: 'rows-truth-stop',
        version: '1',
        state: TruthState,
        agents: [Start, forEach((s: TruthState) => s.items ?? [], Stopper, { into: 'reviews', concurrency: 2 }), Finish],
      })
      class Stopping {}
      const waypoint = await open([Stopping]);
      const first = await waypoint.run(Stopping, { runId: 'truth-stop', input: { topic: 't' }, signal: stop.signal });
      assert.equal(first.status, 'paused');
      await compareEveryCheckpoint(waypoint, bare, 'truth-stop');
      const second = await waypoint.resume('truth-stop');
      assert.equal(second.status, 'completed');
      await compareEveryCheckpoint(waypoint, bare, 'truth-stop');
      assert.deepEqual((await bare.checkpoint('truth-stop')).shared_context, { ...second.state });
    });
  });
}
