import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { Agent, MemoryCheckpointStore, Pipeline, Step, TOKENS, Waypoint, type RunRecord, type StepContext, type StepRecord, WaypointError } from '../../src/index';
import { checkRows, stepDigest } from '../../src/core/history/row-integrity';

// The edges of integrity checking (issue 19): rows missing at the start or the end, a digest column holding
// anything, the run's input, every column of a row, and the chain between rows. Each case checks that a
// resume and a load refuse with CHECKPOINT_CORRUPTED naming the run and the sequence, that nothing ran, and
// that the store is exactly as it was.

let executed: string[] = [];

class Four extends Agent {
  @Step() a() {
    executed.push('a');
    return { a: 1 };
  }
  @Step() b() {
    executed.push('b');
    return { b: 2 };
  }
  @Step() c() {
    executed.push('c');
    return { c: 3 };
  }
  @Step() d(ctx: StepContext<{ a: number; c: number }>) {
    executed.push('d');
    return { d: ctx.state.a + ctx.state.c };
  }
}
@Pipeline({ name: 'edges', version: '1', agents: [Four] })
class Edges {}

interface Inside {
  runs: Map<string, RunRecord>;
  steps: Map<string, StepRecord[]>;
  operations: Map<string, unknown>;
}
const inside = (store: MemoryCheckpointStore) => store as unknown as Inside;
const rows = (store: MemoryCheckpointStore, runId: string) => inside(store).steps.get(runId)!;
/** Everything the store holds, as text: two equal dumps mean nothing was written. */
const dump = (store: MemoryCheckpointStore) => JSON.stringify([[...inside(store).runs], [...inside(store).steps], [...inside(store).operations]]);

async function setup(status: 'completed' | 'paused', runId = 'e1') {
  const store = new MemoryCheckpointStore();
  const modules = [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store))];
  const waypoint = await Waypoint.create({ modules, pipelines: [Edges] });
  await waypoint.run(Edges, { runId, input: { topic: 'x' } });
  // As if the process had paused after the last step: the run is resumable.
  if (status === 'paused') await store.updateRun(runId, { status: 'paused' }, null);
  executed = [];
  return { store, waypoint };
}

/** Every read and resume path refuses with CHECKPOINT_CORRUPTED at `sequence`, runs nothing, writes nothing. */
async function assertRefused(store: MemoryCheckpointStore, waypoint: Waypoint, sequence: number, runId = 'e1') {
  const before = dump(store);
  const corrupted = (e: unknown) => {
    assert.ok(e instanceof WaypointError, `expected a WaypointError, got ${String(e)}`);
    assert.equal(e.code, 'CHECKPOINT_CORRUPTED', e.message);
    assert.match(e.message, new RegExp(`'${runId}'`));
    assert.match(e.message, new RegExp(`sequence ${sequence}\\b`));
    return true;
  };
  await assert.rejects(waypoint.run(Edges, { runId }), corrupted);
  await assert.rejects(waypoint.resume(runId), corrupted);
  await assert.rejects(waypoint.run(Edges, { runId, input: { topic: 'x' } }), corrupted);
  await assert.rejects(waypoint.checkpoints(runId), corrupted);
  await assert.rejects(waypoint.checkpoint(runId), corrupted);
  assert.deepEqual(executed, []);
  assert.equal(dump(store), before, 'the checks changed the store');
}

describe('integrity at the edges (memory store)', () => {
  for (const status of ['completed', 'paused'] as const) {
    it(`a deleted last row of a ${status} run is corruption at that sequence`, async () => {
      const { store, waypoint } = await setup(status);
      rows(store, 'e1').pop();
      await assertRefused(store, waypoint, 4);
    });

    it(`a last row moved to another run (${status}) is corruption in both runs`, async () => {
      const { store, waypoint } = await setup(status);
      await waypoint.run(Edges, { runId: 'other', input: { topic: 'y' } });
      if (status === 'paused') await store.updateRun('other', { status: 'paused' }, null);
      const moved = rows(store, 'e1').pop()!;
      // The other run's own last row goes, and the moved one takes its place under the other run's id.
      rows(store, 'other').pop();
      rows(store, 'other').push({ ...moved, runId: 'other' });
      executed = [];
      await assertRefused(store, waypoint, 4);
      await assertRefused(store, waypoint, 4, 'other');
    });

    it(`a deleted first row of a ${status} run is corruption, not a plan mismatch`, async () => {
      const { store, waypoint } = await setup(status);
      rows(store, 'e1').shift();
      await assertRefused(store, waypoint, 1);
    });
  }

  it('a deleted middle row, and two swapped rows', async () => {
    const { store, waypoint } = await setup('paused');
    const [one, two, three, four] = rows(store, 'e1');
    inside(store).steps.set('e1', [one, three, four]);
    await assertRefused(store, waypoint, 2);
    inside(store).steps.set('e1', [one, { ...three, sequence: 2 }, { ...two, sequence: 3 }, four]);
    await assertRefused(store, waypoint, 2);
  });

  it('a digest column holding a non-ASCII character is reported, not a RangeError', async () => {
    const { store, waypoint } = await setup('paused');
    const row = rows(store, 'e1')[1];
    row.sha256 = row.sha256.slice(0, -1) + 'é';
    await assertRefused(store, waypoint, 2);
  });

  const columns: [string, (row: StepRecord) => void][] = [
    ['checkpointId', (row) => (row.checkpointId = row.checkpointId.replace(/.$/, (c) => (c === '0' ? '1' : '0')))],
    ['startedAt', (row) => (row.startedAt = new Date(row.startedAt.getTime() + 1))],
    ['completedAt', (row) => (row.completedAt = new Date(row.completedAt.getTime() - 1))],
    ['idempotencyKey', (row) => (row.idempotencyKey = 'x' + row.idempotencyKey.slice(1))],
    ['attempt', (row) => (row.attempt = 2)],
    ['status', (row) => (row.status = 'skipped')],
    ['output (truncated)', (row) => (row.output = row.output.slice(0, -1))],
    ['memory', (row) => (row.memory = '{}')],
    ['sideEffectsCommitted', (row) => (row.sideEffectsCommitted = true)],
  ];
  for (const [column, alter] of columns) {
    it(`a changed ${column} of a row is corruption`, async () => {
      const { store, waypoint } = await setup('paused');
      alter(rows(store, 'e1')[2]);
      await assertRefused(store, waypoint, 3);
    });
  }

  it("a changed byte of the run's input or pipeline name is corruption", async () => {
    const { store, waypoint } = await setup('paused');
    const run = inside(store).runs.get('e1')!;
    const input = run.input;
    run.input = input.replace('"x"', '"z"');
    await assertRefused(store, waypoint, 1);
    run.input = input;
    const other = await setup('paused', 'e2');
    inside(other.store).runs.get('e2')!.pipelineName = 'edgez';
    // The run now claims another pipeline: reading it is refused as corrupted, whatever pipeline asks.
    await assert.rejects(other.waypoint.checkpoints('e2'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED');
    await assert.rejects(other.waypoint.run(Edges, { runId: 'e2' }), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED');
  });

  it('a row re-sealed out of its chain (as if replayed from an earlier write) is corruption', async () => {
    const { store, waypoint } = await setup('paused');
    const row = rows(store, 'e1')[2];
    const { sha256: _old, ...rest } = row;
    // A valid seal of the same content, but chained to nothing: what a replayed or re-inserted row has.
    row.sha256 = stepDigest(rest, {}, { identity: 'whatever', prev: '' });
    await assertRefused(store, waypoint, 3);
  });

  it('the checks report every problem, in sequence order', () => {
    return setup('paused').then(({ store }) => {
      const all = rows(store, 'e1');
      const run = inside(store).runs.get('e1')!;
      all[1].output = '{"b":9}';
      all.pop();
      const problems = checkRows(run, all, {});
      assert.deepEqual(
        problems.map((p) => p.sequence),
        [2, 4],
      );
      assert.ok(problems.every((p) => p.error.code === 'CHECKPOINT_CORRUPTED'));
    });
  });

  it('fallback re-runs the steps whose rows are missing at the end, never the run from the start', async () => {
    const { store } = await setup('paused');
    rows(store, 'e1').pop();
    const modules = [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store))];
    const fallback = await Waypoint.create({ modules, onCorruption: 'fallback', pipelines: [Edges] });
    const result = await fallback.resume('e1');
    assert.deepEqual(executed, ['d']);
    assert.equal(result.status, 'completed');
    assert.deepEqual(
      rows(store, 'e1').map((r) => r.sequence),
      [1, 2, 3, 4],
    );
    assert.deepEqual(checkRows(inside(store).runs.get('e1')!, rows(store, 'e1'), {}), []);
    // A run whose first row is gone is refused even under fallback: it would start over.
    const other = await setup('paused', 'e3');
    rows(other.store, 'e3').shift();
    const modules3 = [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(other.store))];
    const fallback3 = await Waypoint.create({ modules: modules3, onCorruption: 'fallback', pipelines: [Edges] });
    await assert.rejects(fallback3.resume('e3'), (e: WaypointError) => e.code === 'CHECKPOINT_CORRUPTED');
    assert.deepEqual(executed, []);
  });

  it('rows sealed in the first digest format (earlier releases) still load and resume; new rows chain after them', async () => {
    const store = new MemoryCheckpointStore();
    const run = (await store.createRun({ runId: 'old', pipelineName: 'edges', pipelineVersion: '1', input: '{"topic":"x"}', metadata: '{}' })).run;
    const grant = (await store.acquireLease('old', 'earlier-release', 60_000))!;
    for (const [sequence, name, output] of [
      [1, 'a', '{"a":1}'],
      [2, 'b', '{"b":2}'],
    ] as const) {
      const row: Omit<StepRecord, 'sha256'> = {
        runId: 'old',
        sequence,
        checkpointId: `c${sequence}`,
        agentIndex: 0,
        agentId: 'Four',
        stepIndex: sequence - 1,
        stepName: name,
        status: 'completed',
        output,
        memory: null,
        idempotencyKey: `k${sequence}`,
        sideEffectsCommitted: false,
        startedAt: new Date(),
        completedAt: new Date(),
        attempt: 1,
      };
      await store.appendStep({
        step: { ...row, sha256: stepDigest(row, {}) },
        run: { cursorAgent: 0, cursorStep: sequence, status: 'running', resumeHint: null },
        fence: { epoch: grant.epoch },
      });
    }
    await store.releaseLease('old', 'earlier-release', grant.epoch);
    await store.updateRun('old', { status: 'paused' }, null);
    assert.equal(run.runId, 'old');
    const modules = [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store))];
    const waypoint = await Waypoint.create({ modules, pipelines: [Edges] });
    executed = [];
    const result = await waypoint.resume('old');
    assert.deepEqual(executed, ['c', 'd']);
    assert.equal((result.state as { d: number }).d, 4);
    assert.equal((await waypoint.checkpoints('old')).length > 0, true);
    assert.deepEqual(checkRows(inside(store).runs.get('old')!, rows(store, 'old'), {}), []);
    // A row in the first format after chained ones is not something Waypoint writes.
    const all = rows(store, 'old');
    const { sha256: _s, ...rest } = all[3];
    all[3].sha256 = stepDigest(rest, {});
    assert.deepEqual(
      checkRows(inside(store).runs.get('old')!, all, {}).map((p) => p.sequence),
      [4],
    );
  });
});
