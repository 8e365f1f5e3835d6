import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule, injectable } from 'inversify';
import { durable } from '../../src/integrations/durable-call';
import { Agent, Pipeline, Step, TOKENS, Waypoint, sqliteStorage, type CheckpointStore, type Logger, type StepContext } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };
const CALLS = 40;

/** What the step's calls were paid for, and how the step's first attempt ends. */
const scenario = { paid: [] as string[], failFirstAttempt: true, seen: [] as string[][] };

@injectable()
class Conversation extends Agent {
  // The first attempt makes every call, then fails; the second replays them all from the record.
  @Step({ retries: { maxAttempts: 2, initialDelayMs: 1, jitter: false } })
  async talk(ctx: StepContext): Promise<{ answers: string[] }> {
    const answers: string[] = [];
    for (let i = 0; i < CALLS; i++) {
      const prompt = `${answers.join('|')}?${i}`;
      answers.push(
        await durable(
          ctx,
          'model',
          () => {
            scenario.paid.push(prompt);
            return `answer ${scenario.paid.length} to ${i}`;
          },
          { request: { prompt } },
        ),
      );
    }
    scenario.seen.push(answers);
    if (ctx.attempt === 1 && scenario.failFirstAttempt) throw new Error('crash after the calls');
    return { answers };
  }
}

@Pipeline({ name: 'replay-reads', version: '1', agents: [Conversation] })
class ReplayReads {}

/** Counts the store's operation reads while `counting` is on. */
function countingReads(store: CheckpointStore, counts: Record<string, number>, counting: () => boolean): void {
  for (const method of ['getOperation', 'listOperations'] as const) {
    const original = store[method].bind(store) as (arg: string) => Promise<unknown>;
    (store as unknown as Record<string, (arg: string) => Promise<unknown>>)[method] = (arg: string) => {
      if (counting()) counts[method] = (counts[method] ?? 0) + 1;
      return original(arg);
    };
  }
}

// Issue 40: a step that replays recorded calls reads the run's operations once, not once per call, and
// gets exactly the recorded responses.
describe('replaying recorded calls', () => {
  it('a replayed step reads its records in a constant number of store calls and returns them exactly', async () => {
    const { file, remove } = tempSqlitePath();
    Object.assign(scenario, { paid: [], failFirstAttempt: true, seen: [] });
    const counts: Record<string, number> = {};
    const waypoint = await Waypoint.create({
      modules: [sqliteStorage({ path: file }), new ContainerModule(({ bind }) => void bind(TOKENS.Logger).toConstantValue(silent))],
    });
    try {
      const store = waypoint.store;
      countingReads(store, counts, () => scenario.seen.length === 1);
      const result = await waypoint.run(ReplayReads, { runId: 'r', input: {} });
      assert.equal(result.status, 'completed');
      assert.equal(scenario.paid.length, CALLS, 'every call was paid for once');
      assert.deepEqual(scenario.seen[1], scenario.seen[0], 'the replay got the recorded responses');
      assert.deepEqual((result.state as { answers: string[] }).answers, scenario.seen[0]);
      // The first replayed call's read, the list, then nothing per call.
      assert.deepEqual(counts, { getOperation: 1, listOperations: 1 });
    } finally {
      await waypoint.close();
      remove();
    }
  });
});
