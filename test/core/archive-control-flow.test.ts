import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Agent, GzipFileArchiveSink, Pipeline, Step, Waypoint, loop, memoryStorage, parallel, type StepContext } from '../../src/index';

/**
 * A control-flow run (a loop, then a parallel) folded at its boundaries while it runs, pruned and
 * restored: every checkpoint of the restored run reads as the same run kept without retention does.
 */

interface Tally {
  total?: number;
  seen?: number;
  left?: string;
  right?: string;
}

class Count extends Agent<{ n: number }> {
  override memory = { n: 0 };
  @Step() tick(ctx: StepContext<Tally>) {
    this.memory.n += 1;
    return { total: (ctx.state.total ?? 0) + 1, seen: this.memory.n };
  }
}
class Left extends Agent {
  @Step() write(ctx: StepContext<Tally>) {
    return { left: `left after ${ctx.state.total}` };
  }
}
class Right extends Agent {
  @Step() write(ctx: StepContext<Tally>) {
    return { right: `right after ${ctx.state.total}` };
  }
}

@Pipeline({ name: 'archive-flow', version: '1', agents: [loop({ until: (s: Tally) => (s.total ?? 0) >= 24, maxIterations: 40 }, Count), parallel(Left, Right)] })
class LoopThenParallel {}

describe('archive and restore of a control-flow run (memory store)', () => {
  it('restored rows give the same checkpoint at every sequence as the run kept without retention', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wp-archive-flow-'));
    const sink = new GzipFileArchiveSink(dir);
    const kept = await Waypoint.create({ modules: [memoryStorage()], pipelines: [LoopThenParallel] });
    const folding = await Waypoint.create({ modules: [memoryStorage()], pipelines: [LoopThenParallel], retention: { compactEvery: 5, keepLast: 3, archive: sink } });
    try {
      const reference = await kept.run<Tally>(LoopThenParallel, { runId: 'flow', input: {} });
      const done = await folding.run<Tally>(LoopThenParallel, { runId: 'flow', input: {} });
      assert.deepEqual({ ...done.state }, { ...reference.state });
      const stored = await folding.store.listSteps('flow');
      assert.equal(stored[0].stepName, 'base', 'folded while it ran');
      assert.ok(stored.length < 12, `${stored.length} rows kept`);

      assert.deepEqual(await folding.retention.prune(new Date(Date.now() + 60_000)), ['flow']);
      assert.equal((await folding.retention.restore('flow')).restored, 'run');
      await folding.verify('flow');
      const expected = await kept.checkpoints('flow');
      const restored = await folding.checkpoints('flow');
      assert.ok(expected.length >= 26, `${expected.length} checkpoints`);
      assert.equal(restored.length, expected.length);
      assert.deepEqual(
        restored.map((c) => [c.checkpoint_sequence, c.shared_context]),
        expected.map((c) => [c.checkpoint_sequence, c.shared_context]),
      );
      assert.deepEqual((await folding.run<Tally>(LoopThenParallel, { runId: 'flow' })).stepsExecuted, 0);
    } finally {
      await kept.close();
      await folding.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
