import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule } from 'inversify';
import { Agent, MemoryCheckpointStore, Pipeline, Step, TOKENS, Waypoint, type Logger, type StepContext } from '../../src/index';
import { supportsStreams } from '../../src/contract/run-stream';
import { liveOutputSuite } from './live-output-suite';

const store = new MemoryCheckpointStore();
liveOutputSuite(
  'the memory store',
  () =>
    new ContainerModule(({ bind }) => {
      bind(TOKENS.CheckpointStore).toConstantValue(store);
    }),
);

describe('live output on a store that keeps no streams', () => {
  it('ctx.emit is a no-op that warns once per run; the run completes as without it', async () => {
    // A user's own store without the RunStreamStore methods (supportsStreams is false).
    class NoStreams extends MemoryCheckpointStore {}
    for (const method of ['appendEvents', 'readEvents', 'waitForEvents', 'streamLength'] as const) Object.defineProperty(NoStreams.prototype, method, { value: undefined });
    const warnings: string[] = [];
    const logger: Logger = { debug() {}, info() {}, warn: (message) => void warnings.push(message), error() {} };
    const waypoint = await Waypoint.create({
      modules: [
        new ContainerModule(({ bind }) => {
          bind(TOKENS.CheckpointStore).toConstantValue(new NoStreams());
          bind(TOKENS.Logger).toConstantValue(logger);
        }),
      ],
    });
    try {
      assert.equal(supportsStreams(waypoint.store), false);
      assert.equal((await waypoint.run(Chatty, { runId: 'quiet-1', input: {} })).status, 'completed');
      assert.equal((await waypoint.run(Chatty, { runId: 'quiet-2', input: {} })).status, 'completed');
      assert.equal(warnings.filter((w) => w.startsWith('ctx.emit ignored')).length, 2, 'one warning per run, not per part');
    } finally {
      await waypoint.close();
    }
  });
});

class Chatter extends Agent {
  @Step() talk(ctx: StepContext) {
    for (let i = 0; i < 10; i++) ctx.emit(i);
    return { talked: true };
  }
}
@Pipeline({ name: 'live-chatty', version: '1', agents: [Chatter] })
class Chatty {}
