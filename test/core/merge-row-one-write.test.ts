import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { IsArray, IsOptional, IsString } from 'class-validator';
import { Agent, MemoryCheckpointStore, Pipeline, Reducer, Step, TOKENS, Waypoint, type StepAppend } from '../../src/index';

/*
 * 'sync' durability: a step whose update reaches a @Reducer is followed by its merge row. Both leave in one
 * write (one appendRun: one round trip, one commit), so no crash can fall between a step's row and its merge
 * row; a step that reaches no reducer is still one appendStep. A reducer that throws fails the step after
 * its row landed, as before.
 */

/** A memory store that keeps each write's rows, by the paths they carry. */
class WriteLog extends MemoryCheckpointStore {
  readonly writes: { call: 'appendStep' | 'appendRun'; paths: string[] }[] = [];
  private inRun = false;
  override appendStep(append: StepAppend): Promise<void> {
    if (!this.inRun) this.writes.push({ call: 'appendStep', paths: [pathOf(append)] });
    return super.appendStep(append);
  }
  override async appendRun(appends: readonly StepAppend[]): Promise<void> {
    this.writes.push({ call: 'appendRun', paths: appends.map(pathOf) });
    this.inRun = true; // the memory store writes a run's rows through appendStep: one call of the runtime's all the same
    try {
      await super.appendRun(appends);
    } finally {
      this.inRun = false;
    }
  }
}

function pathOf(append: StepAppend): string {
  return append.step.path ?? `${append.step.agentId}/${append.step.stepName}`;
}

const hooks: { failReducer?: boolean } = {};

class LogState {
  @IsString() subject!: string;
  @IsOptional()
  @IsArray()
  @Reducer((a: string[] = [], b: string[] = []) => {
    if (hooks.failReducer && b.includes('bad')) throw new Error('reducer refused the item');
    return [...a, ...b];
  })
  log?: string[];
  @IsOptional() @IsString() note?: string;
}

class Writer extends Agent {
  @Step() first() {
    return { log: ['one'] };
  }
  @Step() plain() {
    return { note: 'no reducer here' };
  }
  @Step() second() {
    return { log: ['two'], note: 'both' };
  }
  @Step() third() {
    return { log: hooks.failReducer ? ['bad'] : ['three'] };
  }
}

@Pipeline({ name: 'merge-row-one-write', version: '1.0.0', state: LogState, agents: [Writer] })
class Logging {}

async function withStore<T>(fn: (waypoint: Waypoint, store: WriteLog) => Promise<T>): Promise<T> {
  const store = new WriteLog();
  const waypoint = await Waypoint.create({ modules: [new ContainerModule(({ bind }) => void bind(TOKENS.CheckpointStore).toConstantValue(store))] });
  try {
    return await fn(waypoint, store);
  } finally {
    await waypoint.close();
  }
}

describe("a reducer step's row and its merge row ('sync')", () => {
  it('leave in one write; a step without a reducer is one appendStep', async () => {
    await withStore(async (waypoint, store) => {
      const result = await waypoint.run(Logging, { runId: 'one-write', input: { subject: 's' } });
      assert.equal(result.status, 'completed');
      assert.deepEqual(result.state.log, ['one', 'two', 'three']);
      const steps = store.writes.filter((w) => w.paths.some((p) => p.startsWith('Writer/')));
      assert.deepEqual(steps, [
        { call: 'appendRun', paths: ['Writer/first', 'Writer/first#merge'] },
        { call: 'appendStep', paths: ['Writer/plain'] },
        { call: 'appendRun', paths: ['Writer/second', 'Writer/second#merge'] },
        { call: 'appendRun', paths: ['Writer/third', 'Writer/third#merge'] },
      ]);
      const checkpoint = await waypoint.get('one-write');
      assert.equal(checkpoint?.status, 'completed');
    });
  });

  it("a reducer that throws fails the step after the step's row landed, with no merge row", async () => {
    hooks.failReducer = true;
    try {
      await withStore(async (waypoint, store) => {
        await assert.rejects(waypoint.run(Logging, { runId: 'bad-reducer', input: { subject: 's' } }), /reducer refused the item/);
        const last = store.writes.at(-1)!;
        assert.deepEqual(last.paths, ['Writer/third'], 'the step row alone: the merge row never formed');
        const rows = (await store.loadRun('bad-reducer'))!.steps.map((s) => s.path ?? `${s.agentId}/${s.stepName}`);
        assert.ok(rows.includes('Writer/third') && !rows.includes('Writer/third#merge'), rows.join(', '));
      });
    } finally {
      hooks.failReducer = false;
    }
  });
});
