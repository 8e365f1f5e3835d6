import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { Agent, MemoryCheckpointStore, Pipeline, Step, TOKENS, Waypoint, type StepContext, WaypointError } from '../../src/index';

const ran: string[] = [];

class A1 extends Agent {
  @Step() fetch() {
    ran.push('v1.fetch');
    return { raw: 'data' };
  }
  @Step() async parse(ctx: StepContext<{ raw: string }>) {
    ran.push('v1.parse');
    await ctx.waitFor('go');
    return { parsed: ctx.state.raw.toUpperCase() };
  }
}
@Pipeline({ name: 'versioned', version: '1.0.0', agents: [A1] })
class V1 {}

// 2.0.0 renames `fetch` to `download`, inserts `clean` before parse, renames state key raw -> text.
class A2 extends Agent {
  static agentId = 'A1';
  @Step() download() {
    ran.push('v2.download');
    return { text: 'data' };
  }
  @Step() clean(ctx: StepContext<{ text: string }>) {
    ran.push('v2.clean');
    return { text: ctx.state.text.trim() };
  }
  @Step() parse(ctx: StepContext<{ text: string }>) {
    ran.push('v2.parse');
    return { parsed: ctx.state.text.toUpperCase() };
  }
}
@Pipeline({
  name: 'versioned',
  version: '2.0.0',
  agents: [A2],
  migrations: [
    {
      from: '1.x',
      to: '2.0.0',
      migrate: (cp) => ({
        state: { text: cp.state.raw },
        memories: cp.memories,
        completedSteps: cp.completedSteps.map((k) => (k === 'A1/fetch' ? 'A1/download' : k)),
      }),
    },
  ],
})
class V2 {}

@Pipeline({ name: 'versioned', version: '3.0.0', agents: [A2] })
class V3 {}

function shared(store: MemoryCheckpointStore) {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
  });
}

describe('versions and forks on the memory store', () => {
  it('migrates a run to a new version, matching steps by key, and records the migration', async () => {
    const store = new MemoryCheckpointStore();
    const old = await Waypoint.create({ modules: [shared(store)] });
    assert.equal((await old.run(V1, { runId: 'v', input: {} })).status, 'waiting');
    const next = await Waypoint.create({ modules: [shared(store)], pipelines: [V2] });
    ran.length = 0;
    const result = await next.resume('v');
    assert.equal(result.status, 'completed');
    assert.deepEqual(ran, ['v2.clean', 'v2.parse']);
    assert.equal(result.state.parsed, 'DATA');
    assert.equal((await next.get('v'))?.version, '2.0.0');
    const cp = await next.checkpoint('v');
    assert.equal(cp.pipeline_version, '2.0.0');
    assert.deepEqual(
      cp.completed_steps.map((s) => s.step_name),
      ['fetch', 'clean', 'parse'],
    );
  });

  it('refuses another version without a migration path, naming both versions', async () => {
    const store = new MemoryCheckpointStore();
    const old = await Waypoint.create({ modules: [shared(store)] });
    await old.run(V1, { runId: 'x', input: {} });
    const next = await Waypoint.create({ modules: [shared(store)] });
    await assert.rejects(next.run(V3, { runId: 'x' }), (e: WaypointError) => e.code === 'VERSION_MISMATCH' && /1\.0\.0/.test(e.message) && /3\.0\.0/.test(e.message));
  });

  it('forks from a step: earlier steps copied, the original untouched, both complete independently', async () => {
    const store = new MemoryCheckpointStore();
    const waypoint = await Waypoint.create({ modules: [shared(store)] });
    const first = await waypoint.run(V2, { runId: 'orig', input: { text: ' a ' } });
    assert.equal(first.state.parsed, 'DATA');
    ran.length = 0;
    const fork = await waypoint.fork('orig', { fromStep: 'clean', newRunId: 'copy', patchState: { text: ' zz ' } });
    assert.equal(fork.status, 'paused');
    const resumed = await waypoint.resume('copy');
    assert.deepEqual(ran, ['v2.clean', 'v2.parse']);
    assert.equal(resumed.state.parsed, 'ZZ');
    assert.equal((await waypoint.checkpoint('orig')).shared_context.parsed, 'DATA');
    await assert.rejects(waypoint.fork('orig', { newRunId: 'copy' }), (e: WaypointError) => e.code === 'RUN_EXISTS');
  });
});
