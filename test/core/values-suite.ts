import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { after, before, describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import {
  Agent,
  CheckpointCorruptedError,
  MAX_VALUE_DEPTH,
  Pipeline,
  Step,
  TOKENS,
  UndecodableValueError,
  Waypoint,
  WaypointError,
  loop,
  type CheckpointStore,
  type Logger,
  type StepContext,
  type WaypointOptions,
} from '../../src/index';
import { linkOf, runIdentity, stepDigest } from '../../src/core/history/row-integrity';
import { scanRun } from '../../src/cli/integrity-scan';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';
import { defineValueTableSuite } from './value-table-suite';

/** Where a backend keeps one suite's data: each call of `modules` opens it again (another process, as far as the data goes). */
export interface ValuesBackend {
  name: string;
  modules(): ContainerModule[];
  /** Options for every Waypoint of the suite (encryption, for the encrypted flavour). */
  options?: Partial<WaypointOptions>;
  dispose(): Promise<void>;
}

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };
const quiet = new ContainerModule(({ bind }) => {
  bind(TOKENS.Logger).toConstantValue(silent);
});

/** `levels` nested arrays (each one stored JSON level) around `leaf`. */
export function nested(levels: number, leaf: unknown = 'leaf'): unknown {
  let value = leaf;
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

/** What the steps of `ValuesPipeline` return and saw; set by each test. */
const hooks = { second: (): unknown => ({ value: 1 }), seen: [] as unknown[] };

class Maker extends Agent {
  @Step() first() {
    return { a: 1 };
  }
  @Step() second() {
    return hooks.second();
  }
  @Step() third(ctx: StepContext<Record<string, unknown>>) {
    hooks.seen.push(ctx.state.value);
    return { done: true };
  }
}

@Pipeline({ name: 'values', version: '1.0.0', agents: [Maker] })
class ValuesPipeline {}

class Counter extends Agent {
  @Step() count(ctx: StepContext<{ n?: number }>) {
    return { n: (ctx.state.n ?? 0) + 1 };
  }
}

@Pipeline({ name: 'values-loop', version: '1.0.0', agents: [loop({ until: (s: { n?: number }) => (s.n ?? 0) >= 30, maxIterations: 40 }, Counter)] })
class LoopPipeline {}

const Sixty = syntheticPipeline({ name: 'values-sixty', steps: 60, payloadBytes: 8 });

/** What a refused value must leave as it was: the run row's progress and every row's digest. */
async function snapshot(store: CheckpointStore, runId: string): Promise<unknown> {
  const run = await store.getRun(runId);
  const rows = await store.listSteps(runId);
  return { status: run?.status, lastSequence: run?.lastSequence, cursor: [run?.cursorAgent, run?.cursorStep], rows: rows.map((r) => `${r.sequence}:${r.sha256}`) };
}

function code(expected: string, ...fragments: string[]) {
  return (err: unknown) => {
    assert.ok(err instanceof WaypointError, `expected a WaypointError, got ${err instanceof Error ? `${err.name}: ${err.message.slice(0, 200)}` : String(err)}`);
    assert.equal(err.code, expected, err.message);
    for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message.slice(0, 600))} lacks ${JSON.stringify(f)}`);
    return true;
  };
}

/**
 * Appends, as another process (or an older release with a larger stack) could, a sealed row whose output is
 * `output` as text: its digest is right, and only decoding it can fail.
 */
async function appendForeignRow(store: CheckpointStore, runId: string, output: string): Promise<number> {
  const loaded = (await store.loadRun(runId))!;
  const last = loaded.steps[loaded.steps.length - 1];
  const grant = (await store.acquireLease(runId, 'older-release', 60_000))!;
  const sequence = loaded.run.lastSequence + 1;
  const { sha256: _old, ...rest } = { ...last, sequence, checkpointId: `${last.checkpointId}:foreign`, stepName: 'first', output, memory: null };
  const row = { ...rest, sha256: stepDigest(rest, {}, { identity: runIdentity(loaded.run), prev: linkOf(last) }) };
  await store.appendStep({ step: row, run: { cursorAgent: 0, cursorStep: 3, status: loaded.run.status, resumeHint: null }, fence: { epoch: grant.epoch } });
  await store.releaseLease(runId, 'older-release', grant.epoch);
  return sequence;
}

/** The stored-values tests on one backend, then the table of values (value-table-suite.ts) on a fresh one of the same kind. */
export function defineValuesSuite(make: () => Promise<ValuesBackend>): void {
  defineValueTableSuite(make);
  let backend: ValuesBackend;
  let waypoint: Waypoint;
  const open = (extra: Partial<WaypointOptions> = {}) =>
    Waypoint.create({ modules: [...backend.modules(), quiet], pipelines: [ValuesPipeline, LoopPipeline, Sixty], ...backend.options, ...extra });

  describe('stored values: depth limit, -0, undecodable rows, forks of folded runs', () => {
    before(async () => {
      backend = await make();
      waypoint = await open();
    });
    after(async () => {
      await waypoint.close();
      await backend.dispose();
    });

    it(`refuses a step output nested past ${MAX_VALUE_DEPTH} levels with UNSERIALIZABLE_VALUE naming the step and path; nothing stored changes`, async () => {
      hooks.second = () => ({ value: nested(MAX_VALUE_DEPTH) }); // the output object is one level more
      await assert.rejects(
        waypoint.run(ValuesPipeline, { runId: 'deep-out', input: {} }),
        code('UNSERIALIZABLE_VALUE', "step 'Maker/second'", "run 'deep-out'", '$.value[0][0]', `deeper than ${MAX_VALUE_DEPTH} levels`),
      );
      const before = await snapshot(waypoint.store, 'deep-out');
      assert.deepEqual((before as { rows: string[] }).rows.length, 1, 'only the first step is stored');
      for (const levels of [MAX_VALUE_DEPTH + 1, 2_500, 100_000]) {
        hooks.second = () => ({ value: nested(levels) });
        await assert.rejects(waypoint.resume('deep-out'), code('UNSERIALIZABLE_VALUE', "step 'Maker/second'", '$.value[0]'));
        assert.deepEqual(await snapshot(waypoint.store, 'deep-out'), before, `after refusing ${levels} levels`);
      }
      hooks.second = () => ({ value: new Map([['k', nested(MAX_VALUE_DEPTH)]]) });
      await assert.rejects(waypoint.resume('deep-out'), code('UNSERIALIZABLE_VALUE', '$.value<value 0>'));
      assert.deepEqual(await snapshot(waypoint.store, 'deep-out'), before);
      await waypoint.verify('deep-out');
    });

    it('refuses an input and a signal payload past the limit with a typed error, storing nothing', async () => {
      for (const levels of [MAX_VALUE_DEPTH, 100_000]) {
        await assert.rejects(waypoint.run(ValuesPipeline, { runId: `deep-in-${levels}`, input: { tree: nested(levels) } }), code('UNSERIALIZABLE_VALUE', 'input', '$.tree[0]'));
        assert.equal(await waypoint.store.getRun(`deep-in-${levels}`), null);
      }
      const paused = 'deep-signal';
      hooks.second = () => {
        throw new Error('stop here');
      };
      await assert.rejects(waypoint.run(ValuesPipeline, { runId: paused, input: {} }));
      const before = await snapshot(waypoint.store, paused);
      await assert.rejects(waypoint.signal(paused, 'go', { tree: nested(100_000) }), code('UNSERIALIZABLE_VALUE', 'signal', '$.tree[0]'));
      assert.deepEqual(await snapshot(waypoint.store, paused), before);
      assert.equal(await waypoint.signal(paused, 'go', { tree: 'flat' }), true, 'the refused payload was not delivered');
    });

    it(`stores, reads back, folds and forks a state nested exactly ${MAX_VALUE_DEPTH} levels deep`, async () => {
      hooks.seen = [];
      // The output object, MAX_VALUE_DEPTH - 2 arrays and the leaf's object: exactly MAX_VALUE_DEPTH levels.
      const atLimit = () => nested(MAX_VALUE_DEPTH - 2, { leaf: -0 });
      hooks.second = () => ({ value: atLimit() });
      const result = await waypoint.run(ValuesPipeline, { runId: 'at-limit', input: {} });
      assert.equal(result.status, 'completed');
      assert.deepStrictEqual(hooks.seen[0], atLimit());
      const reader = await open();
      try {
        assert.deepStrictEqual((await reader.checkpoint('at-limit')).shared_context.value, atLimit());
        assert.equal((await reader.checkpoints('at-limit')).length, 4);
        await reader.verify('at-limit');
        assert.deepEqual(scanRun((await reader.store.getRun('at-limit'))!, await reader.store.listSteps('at-limit'), {}), []);
        // A base snapshot holds the state one level deeper: retention must still fold it, and readers read it.
        const folding = await open({ retention: { keepLast: 1 } });
        try {
          assert.equal(await folding.retention.compact('at-limit'), 2);
        } finally {
          await folding.close();
        }
        assert.deepStrictEqual((await reader.checkpoint('at-limit')).shared_context.value, atLimit());
        await reader.verify('at-limit');
        await reader.fork('at-limit', { newRunId: 'at-limit-fork', fromSequence: 2 });
        assert.equal((await reader.resume('at-limit-fork')).status, 'completed');
        assert.deepStrictEqual((await reader.checkpoint('at-limit-fork')).shared_context.value, atLimit());
      } finally {
        await reader.close();
      }
    });

    it('keeps -0 through storage: the next step, the result, a fresh reader, history and verify', async () => {
      hooks.seen = [];
      hooks.second = () => ({ value: -0, list: [-0, 0, 1], nested: { m: new Map([['k', -0]]) } });
      const result = await waypoint.run(ValuesPipeline, { runId: 'negative-zero', input: { start: -0 } });
      assert.ok(Object.is(hooks.seen[0], -0), 'the next step sees -0');
      const state = result.state;
      assert.ok(Object.is(state.value, -0), 'the result keeps -0');
      assert.ok(Object.is(state.start, -0), 'the input keeps -0');
      const reader = await open();
      try {
        const stored = (await reader.checkpoint('negative-zero')).shared_context;
        assert.ok(Object.is(stored.value, -0) && Object.is(stored.start, -0));
        assert.deepStrictEqual(stored.list, [-0, 0, 1]);
        assert.ok(Object.is(stored.list[0], -0) && Object.is(stored.list[1], 0), '-0 and 0 stay apart');
        assert.ok(Object.is((stored.nested as { m: Map<string, number> }).m.get('k'), -0));
        const history = await reader.checkpoints('negative-zero');
        assert.ok(Object.is(history[2].shared_context.value, -0));
        await reader.verify('negative-zero');
      } finally {
        await reader.close();
      }
    });

    it('verify reports a sealed row this process cannot decode, naming run and sequence; reads fail typed, never with RangeError', async () => {
      hooks.second = () => ({ value: 'x' });
      await waypoint.run(ValuesPipeline, { runId: 'foreign', input: {} });
      // What a process with a larger --stack-size could write before the limit existed: sealed, and too deep.
      const deep = `{"value":${'['.repeat(2_500)}1${']'.repeat(2_500)}}`;
      const sequence = await appendForeignRow(waypoint.store, 'foreign', deep);
      const reader = await open();
      try {
        await assert.rejects(reader.verify('foreign'), (err: unknown) => {
          assert.ok(err instanceof CheckpointCorruptedError, String(err));
          assert.equal(err.sequence, sequence);
          assert.ok(err.message.includes("run 'foreign'") && err.message.includes(`sequence ${sequence}`) && err.message.includes('cannot be read back'), err.message);
          return true;
        });
        const problems = scanRun((await reader.store.getRun('foreign'))!, await reader.store.listSteps('foreign'), {});
        assert.deepEqual(
          problems.map((p) => [p.runId, p.sequence]),
          [['foreign', sequence]],
        );
        assert.match(problems[0].reason, /output cannot be read back by this process/);
        const typed = (err: unknown) => err instanceof UndecodableValueError && (err as WaypointError).code === 'UNSERIALIZABLE_VALUE';
        await assert.rejects(reader.checkpoint('foreign'), typed);
        await assert.rejects(reader.checkpoints('foreign'), typed);
        await assert.rejects(reader.fork('foreign', { newRunId: 'foreign-fork' }), code('CHECKPOINT_CORRUPTED', `sequence ${sequence}`));
        assert.equal(await reader.store.getRun('foreign-fork'), null);
        await reader.fork('foreign', { newRunId: 'foreign-fork-ok', fromSequence: sequence - 1 });
        // Bad JSON under a good digest is reported the same way.
        hooks.second = () => ({ value: 'y' });
        await reader.run(ValuesPipeline, { runId: 'foreign-json', input: {} });
        const bad = await appendForeignRow(reader.store, 'foreign-json', '{"value":');
        await assert.rejects(reader.verify('foreign-json'), code('CHECKPOINT_CORRUPTED', `sequence ${bad}`, 'not valid JSON'));
      } finally {
        await reader.close();
      }
    });

    it('refuses a fork from a sequence retention folded (straight line), naming the oldest forkable sequence', async () => {
      const folding = await open({ retention: { keepLast: 2 } });
      try {
        assert.equal((await folding.run(Sixty, { runId: 'sixty', input: {} })).status, 'completed');
        assert.equal(await folding.retention.compact('sixty'), 58);
        const rows = await folding.store.listSteps('sixty');
        assert.deepEqual([rows[0].stepName, rows[0].sequence], ['base', 58]);
        await assert.rejects(folding.checkpoint('sixty', 57), code('NO_SUCH_CHECKPOINT'));
        for (const fromSequence of [57, 10, 0]) {
          await assert.rejects(
            folding.fork('sixty', { newRunId: `sixty-${fromSequence}`, fromSequence }),
            code('NO_SUCH_CHECKPOINT', "Run 'sixty'", `sequence ${fromSequence}`, '58 is the oldest sequence a fork can start from'),
          );
          assert.equal(await folding.store.getRun(`sixty-${fromSequence}`), null, 'no run created');
        }
        await assert.rejects(folding.fork('sixty', { newRunId: 'sixty-step', fromStep: 'Agent0/s3' }), code('NO_SUCH_STEP', 'retention folded'));
        await folding.fork('sixty', { newRunId: 'sixty-58', fromSequence: 58 });
        const resumed = await folding.resume('sixty-58');
        assert.equal(resumed.status, 'completed');
        assert.equal(resumed.stepsExecuted, 2, 'only the steps after the base row run again');
        assert.equal(Object.keys(resumed.state).length, 60);
      } finally {
        await folding.close();
      }
    });

    it('refuses a fork from a sequence retention folded (control flow)', async () => {
      const folding = await open({ retention: { keepLast: 3, compactEvery: 5 } });
      try {
        assert.equal((await folding.run(LoopPipeline, { runId: 'looped', input: {} })).status, 'completed');
        const rows = await folding.store.listSteps('looped');
        assert.equal(rows[0].stepName, 'base', 'retention folded the loop');
        const oldest = rows[0].sequence;
        assert.ok(oldest > 1);
        await assert.rejects(folding.checkpoint('looped', oldest - 1), code('NO_SUCH_CHECKPOINT'));
        await assert.rejects(folding.fork('looped', { newRunId: 'looped-early', fromSequence: oldest - 1 }), code('NO_SUCH_CHECKPOINT', `${oldest} is the oldest sequence`));
        assert.equal(await folding.store.getRun('looped-early'), null);
        await folding.fork('looped', { newRunId: 'looped-ok', fromSequence: oldest });
        const resumed = await folding.resume('looped-ok');
        assert.equal(resumed.status, 'completed');
        assert.equal((resumed.state as { n: number }).n, 30);
        assert.ok(resumed.stepsExecuted < 30, `ran ${resumed.stepsExecuted} steps, not the whole loop again`);
      } finally {
        await folding.close();
      }
    });
  });
}
