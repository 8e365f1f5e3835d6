import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Agent, Pipeline, Step, Waypoint, memoryStorage, type StepContext } from '../../src/index';

// `waypoint.checkpoints(runId)` is the history a caller walks for time travel or a fork from the start:
// it must begin with the checkpoint at sequence 0 (the input state, nothing completed). Failed before
// the fix (src/core/history/checkpoint-manager.ts checkpointsOf emitted sequence 0 only when asked for it alone).

class History {
  ticker = '';
  notes: string[] = [];
}

class Analyst extends Agent<{ calls: number }> {
  override memory = { calls: 0 };
  @Step() gather(ctx: StepContext<History>) {
    this.memory.calls += 1;
    return { notes: [...ctx.state.notes, 'gathered'] };
  }
  @Step() analyse(ctx: StepContext<History>) {
    this.memory.calls += 1;
    return { notes: [...ctx.state.notes, 'analysed'] };
  }
  @Step() report(ctx: StepContext<History>) {
    return { notes: [...ctx.state.notes, 'reported'] };
  }
}

@Pipeline({ name: 'checkpoint-history', version: '1.0.0', state: History, agents: [Analyst] })
class HistoryPipeline {}

describe('checkpoints(runId): the whole history', () => {
  it('a 3-step run has 4 checkpoints; the first is sequence 0 with the input state and nothing completed', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    try {
      await waypoint.run(HistoryPipeline, { runId: 'h1', input: { ticker: 'AAPL' } });
      const all = await waypoint.checkpoints('h1');
      assert.deepEqual(
        all.map((c) => c.checkpoint_sequence),
        [0, 1, 2, 3],
      );
      const [start] = all;
      assert.deepEqual(start.shared_context, { ticker: 'AAPL', notes: [] }, 'the input state (with the state class defaults)');
      assert.deepEqual(start.completed_steps, []);
      assert.deepEqual(start.agent_memory_snapshots, {});
      assert.deepEqual([start.current_agent_index, start.current_step_index], [0, 0], 'the next step is the first');
      assert.equal(start.is_terminal, false);
      assert.deepEqual(start, await waypoint.checkpoint('h1', 0), 'the same view as checkpoint(runId, 0)');
      assert.deepEqual(all[3], await waypoint.checkpoint('h1'), 'the last is the latest');
    } finally {
      await waypoint.close();
    }
  });

  it('a run that has not run a step yet has exactly the checkpoint at sequence 0', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    try {
      await waypoint.prepare(HistoryPipeline, { runId: 'h2', input: { ticker: 'MSFT' } });
      const all = await waypoint.checkpoints('h2');
      assert.deepEqual(
        all.map((c) => [c.checkpoint_sequence, c.shared_context]),
        [[0, { ticker: 'MSFT', notes: [] }]],
      );
    } finally {
      await waypoint.close();
    }
  });

  it('after retention folded the start into a base snapshot, the history starts at the base (as checkpoint() allows)', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()], retention: { keepLast: 1 } });
    try {
      await waypoint.run(HistoryPipeline, { runId: 'h3', input: { ticker: 'IBM' } });
      await waypoint.retention.compact('h3');
      const all = await waypoint.checkpoints('h3');
      const oldest = all[0].checkpoint_sequence;
      assert.ok(oldest > 0, `the oldest kept checkpoint is the base, not 0 (got ${oldest})`);
      await assert.rejects(waypoint.checkpoint('h3', 0), (e: { code?: string }) => e.code === 'NO_SUCH_CHECKPOINT');
      assert.deepEqual(all.at(-1), await waypoint.checkpoint('h3'));
    } finally {
      await waypoint.close();
    }
  });
});
