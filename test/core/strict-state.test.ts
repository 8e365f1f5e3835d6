import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, beforeEach, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { IsInt, IsOptional, IsString } from 'class-validator';
import { Type } from 'class-transformer';
import {
  Agent,
  MemoryCheckpointStore,
  Pipeline,
  Reducer,
  Secret,
  Step,
  TOKENS,
  UndeclaredStateError,
  Waypoint,
  WaypointError,
  forEach,
  ItemFailedError,
  loop,
  parallel,
  readPlan,
  sqliteStorage,
  type Logger,
  type StepContext,
} from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

/** A decorator of the user's own: TypeScript still records `design:type` for the property it marks. */
function Documented(): PropertyDecorator {
  return () => undefined;
}

class Address {
  city = '';
}

class ReportState {
  ticker = '';
  @IsOptional() @IsString() title?: string;
  @IsOptional() @IsInt() score?: number;
  @Type(() => Address) address?: Address;
  @Secret() token?: string;
  @Reducer((a: string[] = [], b: string[] = []) => [...a, ...b]) notes?: string[];
  @Documented() summary?: string;
  @IsOptional() reviews?: unknown[];
}

/** What the step that a test aims at returns. */
let output: Record<string, unknown> = {};
let calls: string[] = [];

class Writer extends Agent {
  @Step() draft() {
    calls.push('draft');
    return { title: 'Q3' };
  }

  @Step({ retries: 2 }) finish() {
    calls.push('finish');
    return output;
  }
}

class Reviewer extends Agent {
  @Step() review(ctx: StepContext<ReportState>) {
    return { score: String(ctx.item).length };
  }
}

/** A forEach body whose item step returns what the test sets. */
class ItemWriter extends Agent {
  @Step() write() {
    return output;
  }
}

@Pipeline({ name: 'strict-items', version: '1.0.0', state: ReportState, strictState: true, agents: [forEach(() => ['a'], ItemWriter, { into: 'reviews' })] })
class StrictItems {}

@Pipeline({ name: 'strict-line', version: '1.0.0', state: ReportState, strictState: true, agents: [Writer] })
class StrictLine {}

@Pipeline({ name: 'lax-line', version: '1.0.0', state: ReportState, agents: [Writer] })
class LaxLine {}

@Pipeline({ name: 'lax-by-choice', version: '1.0.0', state: ReportState, strictState: false, agents: [Writer] })
class LaxByChoice {}

@Pipeline({ name: 'strict-flow', version: '1.0.0', state: ReportState, strictState: true, agents: [loop({ until: () => true, maxIterations: 2 }, parallel(Writer))] })
class StrictFlow {}

@Pipeline({ name: 'strict-each', version: '1.0.0', state: ReportState, strictState: true, agents: [forEach(() => ['a', 'bb'], Reviewer, { into: 'reviews' })] })
class StrictEach {}

/** Its `into` is undeclared: readable (and runnable) only while strictState is off. */
@Pipeline({ name: 'loose-each', version: '1.0.0', state: ReportState, agents: [parallel(forEach(() => ['a'], Reviewer, { into: 'extras' }))] })
class LooseEach {}

/** No state class: strictState has nothing to check, whatever the Waypoint's default. */
@Pipeline({ name: 'stateless-line', version: '1.0.0', agents: [Writer] })
class StatelessLine {}

beforeEach(() => {
  output = { score: 3 };
  calls = [];
});

/** Matches an UndeclaredStateError naming `properties` (and the step, when one is given). */
function undeclared(runId: string, properties: string[], step?: string) {
  return (err: unknown) => {
    assert.ok(err instanceof UndeclaredStateError, `expected UndeclaredStateError, got ${String(err)}`);
    assert.equal(err.code, 'UNDECLARED_STATE');
    assert.deepEqual(err.properties, properties);
    assert.equal(err.runId, runId);
    assert.equal(err.step, step);
    for (const p of properties) assert.ok(err.message.includes(`'${p}'`), err.message);
    assert.ok(err.message.includes('ReportState') && err.message.includes('strictState'), err.message);
    assert.match(err.message, step ? /Nothing was recorded and the step is not retried: declare/ : /Nothing was written: declare/);
    return true;
  };
}

function definitionError(...fragments: string[]) {
  return (err: unknown) => {
    assert.ok(err instanceof WaypointError, String(err));
    assert.equal(err.code, 'PIPELINE_DEFINITION', err.message);
    for (const f of fragments) assert.ok(err.message.includes(f), `${err.message} lacks ${f}`);
    return true;
  };
}

describe('strictState: the definition', () => {
  it('refuses strictState without a state class, and a value that is not a boolean', () => {
    assert.throws(() => Pipeline({ name: 'no-state', version: '1', strictState: true, agents: [Writer] })(class NoState {}), definitionError('NoState', 'state class'));
    const options = { name: 'odd', version: '1', state: ReportState, strictState: 'yes' as unknown as boolean, agents: [Writer] };
    assert.throws(() => Pipeline(options)(class Odd {}), definitionError('Odd', 'strictState must be true or false'));
  });

  it('declares initializer fields and every decorated property, and nothing else', () => {
    const declared = readPlan(StrictLine).declared!;
    assert.deepEqual([...declared].sort(), ['address', 'notes', 'reviews', 'score', 'ticker', 'title', 'token']);
    // `summary` only has design:type (looked up for a key outside the set): the run below accepts it.
    class ExtendedState extends ReportState {
      draftCount = 0;
      @IsOptional() @IsString() reviewer?: string;
    }
    @Pipeline({ name: 'strict-extended', version: '1.0.0', state: ExtendedState, strictState: true, agents: [Writer] })
    class StrictExtended {}
    const inherited = readPlan(StrictExtended).declared!;
    assert.deepEqual([...inherited].sort(), ['address', 'draftCount', 'notes', 'reviewer', 'reviews', 'score', 'ticker', 'title', 'token']);
    assert.equal(readPlan(LaxLine).declared, readPlan(StrictLine).declared, 'computed once per state class');
  });

  it('refuses a strict forEach whose into the state class does not declare, when the plan is read', () => {
    @Pipeline({ name: 'strict-bad-each', version: '1.0.0', state: ReportState, strictState: true, agents: [parallel(forEach(() => [], Reviewer, { into: 'extras' }))] })
    class StrictBadEach {}
    assert.throws(() => readPlan(StrictBadEach), definitionError("'strict-bad-each'", 'forEach(extras)', "'extras'", 'ReportState'));
    assert.deepEqual(readPlan(LooseEach).undeclaredTargets, [{ construct: 'forEach(extras)', property: 'extras' }]);
    assert.deepEqual(readPlan(StrictEach).undeclaredTargets, []);
  });
});

/** The runtime behaviour, on one backend. */
function suite(backend: string, storage: () => ContainerModule) {
  const open: Waypoint[] = [];
  after(async () => {
    for (const w of open) await w.close();
  });
  async function create(strictState?: boolean): Promise<Waypoint> {
    const logger = new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent));
    const waypoint = await Waypoint.create({ modules: [storage(), logger], ...(strictState === undefined ? {} : { strictState }) });
    open.push(waypoint);
    return waypoint;
  }
  let n = 0;
  const id = (what: string) => `${backend}-${what}-${++n}-${process.pid}`;

  describe(`strictState on ${backend}`, () => {
    it('a strict pipeline whose input and outputs are declared runs to the end', async () => {
      const waypoint = await create();
      output = { score: 7, summary: 'fine', notes: ['a'], address: { city: 'Oslo' } };
      const runId = id('ok');
      const result = await waypoint.run<ReportState>(StrictLine, { runId, input: { ticker: 'AAPL', token: undefined } });
      assert.equal(result.status, 'completed');
      assert.equal(result.state.score, 7);
      assert.equal(result.state.summary, 'fine');
      const each = await waypoint.run<ReportState>(StrictEach, { runId: id('each'), input: { ticker: 'X' } });
      assert.equal(each.status, 'completed');
      assert.equal(each.state.reviews?.length, 2);
    });

    it('refuses undeclared input properties before anything is written', async () => {
      const waypoint = await create();
      const runId = id('input');
      await assert.rejects(waypoint.run(StrictLine, { runId, input: { ticker: 'AAPL', sector: 'tech', tikcer: 'typo' } }), undeclared(runId, ['sector', 'tikcer']));
      assert.equal(await waypoint.get(runId), null);
      assert.deepEqual(calls, []);
    });

    it('refuses an undeclared step output: no row, last sequence unchanged, not retried', async () => {
      const waypoint = await create();
      output = { score: 1, verdict: 'ship' };
      const runId = id('output');
      await assert.rejects(waypoint.run(StrictLine, { runId, input: { ticker: 'AAPL' } }), undeclared(runId, ['verdict'], 'Writer/finish'));
      const info = await waypoint.get(runId);
      assert.equal(info!.status, 'failed');
      assert.equal(info!.lastSequence, 1);
      assert.equal((info!.error as { code: string }).code, 'UNDECLARED_STATE');
      assert.deepEqual(calls, ['draft', 'finish'], 'a refused output is not retried');
      const recorded = (await waypoint.checkpoints(runId)).at(-1)!.completed_steps.map((s) => s.step_name);
      assert.deepEqual(recorded, ['draft'], 'the refused step left no row');
      output = { score: 2 };
      const resumed = await waypoint.resume<ReportState>(runId);
      assert.equal(resumed.status, 'completed');
      assert.equal((await waypoint.get(runId))!.lastSequence, 2);
    });

    it('refuses an undeclared output inside control flow (loop, parallel)', async () => {
      const waypoint = await create();
      output = { verdict: 'ship' };
      const runId = id('flow');
      await assert.rejects(waypoint.run(StrictFlow, { runId, input: { ticker: 'AAPL' } }), undeclared(runId, ['verdict'], 'loop[0]/parallel[0]/Writer/finish'));
      const info = await waypoint.get(runId);
      assert.equal(info!.status, 'failed');
      const checkpoints = await waypoint.checkpoints(runId);
      assert.equal(info!.lastSequence, 1, 'only the first step has a row');
      assert.equal(checkpoints.at(-1)!.checkpoint_sequence, 1);
      const recorded = checkpoints.at(-1)!.completed_steps.map((s) => s.step_name);
      assert.ok(recorded.includes('draft') && !recorded.includes('finish'), `the refused step left no row: ${recorded.join(', ')}`);
      assert.deepEqual(calls, ['draft', 'finish']);
    });

    it('refuses an undeclared output of a forEach item step', async () => {
      const waypoint = await create();
      output = { score: 1, verdict: 'ship' };
      const runId = id('items');
      // The item's failure fails the forEach (ITEM_FAILED), with the refusal as its cause.
      await assert.rejects(waypoint.run(StrictItems, { runId, input: {} }), (err: unknown) => {
        assert.ok(err instanceof ItemFailedError, String(err));
        const cause = err.cause;
        assert.ok(cause instanceof UndeclaredStateError, String(cause));
        assert.equal(cause.step, 'forEach(reviews)[0]/ItemWriter/write');
        assert.deepEqual(cause.properties, ['verdict']);
        return true;
      });
      // Only the forEach's item list (a decision row) is recorded; the refused item step left no row.
      assert.equal((await waypoint.get(runId))!.lastSequence, 1);
      const recorded = (await waypoint.checkpoints(runId)).at(-1)!.completed_steps.map((s) => s.step_name);
      assert.ok(!recorded.includes('write'), recorded.join(', '));
      output = { score: 1 };
      assert.equal((await waypoint.resume(runId)).status, 'completed');
    });

    it('the global default applies to pipelines that do not choose, and the pipeline own setting wins', async () => {
      const strict = await create(true);
      output = { verdict: 'ship' };
      const refused = id('global');
      await assert.rejects(strict.run(LaxLine, { runId: refused, input: { ticker: 'A', extra: 1 } }), undeclared(refused, ['extra']));
      assert.equal(await strict.get(refused), null);
      const outputRefused = id('global-out');
      await assert.rejects(strict.run(LaxLine, { runId: outputRefused, input: { ticker: 'A' } }), undeclared(outputRefused, ['verdict'], 'Writer/finish'));
      // A forEach into an undeclared property: refused under the default, before the run is created.
      const each = id('global-each');
      await assert.rejects(strict.run(LooseEach, { runId: each, input: {} }), definitionError("'loose-each'", 'forEach(extras)', "'extras'"));
      assert.equal(await strict.get(each), null);
      const chosen = await strict.run<Record<string, unknown>>(LaxByChoice, { runId: id('chosen'), input: { ticker: 'A', extra: 1 } });
      assert.equal(chosen.status, 'completed');
      assert.equal(chosen.state.verdict, 'ship');
      const stateless = await strict.run<Record<string, unknown>>(StatelessLine, { runId: id('stateless'), input: { anything: 1 } });
      assert.equal(stateless.status, 'completed');
      assert.equal(stateless.state.verdict, 'ship');
    });

    it('strictState off (the default) stores undeclared properties as before', async () => {
      const waypoint = await create();
      output = { verdict: 'ship' };
      const lax = await waypoint.run<Record<string, unknown>>(LaxLine, { runId: id('lax'), input: { ticker: 'A', extra: 1 } });
      assert.equal(lax.status, 'completed');
      assert.equal(lax.state.extra, 1);
      const loose = await waypoint.run<Record<string, unknown>>(LooseEach, { runId: id('loose'), input: {} });
      assert.equal((loose.state.extras as unknown[]).length, 1);
    });

    it('refuses an undeclared patchState of a fork, which is then not created', async () => {
      const waypoint = await create();
      const runId = id('source');
      await waypoint.run(StrictLine, { runId, input: { ticker: 'A' } });
      const newRunId = id('fork');
      await assert.rejects(waypoint.fork(runId, { newRunId, fromSequence: 1, patchState: { score: 1, verdict: 'no' } }), undeclared(newRunId, ['verdict']));
      assert.equal(await waypoint.get(newRunId), null);
      const fine = await waypoint.fork(runId, { newRunId: id('fork-ok'), fromSequence: 1, patchState: { score: 1 } });
      assert.equal(fine.status, 'paused');
    });
  });
}

suite('memory', () => {
  const store = new MemoryCheckpointStore();
  return new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store));
});

const db = tempSqlitePath();
after(() => db.remove());
suite('sqlite', () => sqliteStorage({ path: db.file }));
