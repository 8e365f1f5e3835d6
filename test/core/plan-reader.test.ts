import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Agent, Pipeline, Step, PipelineDefinitionError, readPlan } from '../../src/index';

function definitionError(...fragments: string[]) {
  return (err: unknown) => {
    assert.ok(err instanceof PipelineDefinitionError, `expected PipelineDefinitionError, got ${String(err)}`);
    assert.equal(err.code, 'PIPELINE_DEFINITION');
    for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
    return true;
  };
}

class Research extends Agent {
  @Step({ retries: 3, timeoutMs: 1000 }) async gather() {}
  @Step({ retries: { maxAttempts: 5, initialDelayMs: 10, jitter: false } }) async rank() {}
}
class Writer extends Agent {
  static agentId = 'writer';
  @Step({ name: 'draft-v2' }) async draft() {}
}

@Pipeline({ name: 'plan-basic', version: '3.1.0', agents: [Research, Writer] })
class Basic {}

describe('readPlan', () => {
  it('builds ordered agents and steps with positions, keys, ids and resolved options', () => {
    const plan = readPlan(Basic);
    assert.equal(plan.name, 'plan-basic');
    assert.equal(plan.version, '3.1.0');
    assert.equal(plan.pipeline, Basic);
    assert.deepEqual(
      plan.agents.map((a) => [a.index, a.id, a.type]),
      [
        [0, 'Research', Research],
        [1, 'writer', Writer],
      ],
    );
    assert.deepEqual(
      plan.steps.map((s) => [s.position, s.agentIndex, s.agentId, s.stepIndex, s.name, s.method, s.key]),
      [
        [0, 0, 'Research', 0, 'gather', 'gather', 'Research/gather'],
        [1, 0, 'Research', 1, 'rank', 'rank', 'Research/rank'],
        [2, 1, 'writer', 0, 'draft-v2', 'draft', 'writer/draft-v2'],
      ],
    );
    const [gather, rank, draft] = plan.steps;
    // retries: n means n retries after the first attempt.
    assert.equal(gather.retry.maxAttempts, 4);
    assert.equal(gather.timeoutMs, 1000);
    assert.deepEqual({ ...rank.retry, retryOn: undefined }, { maxAttempts: 5, initialDelayMs: 10, maxDelayMs: 30_000, factor: 2, jitter: false, retryOn: undefined });
    assert.deepEqual({ ...draft.retry, retryOn: undefined }, { maxAttempts: 1, initialDelayMs: 200, maxDelayMs: 30_000, factor: 2, jitter: true, retryOn: undefined });
    assert.equal(draft.timeoutMs, undefined);
    assert.equal(plan.byKey.get('writer/draft-v2'), draft);
    assert.deepEqual(plan.agents[0].steps, [gather, rank]);
    assert.deepEqual(plan.migrations, []);
  });

  it('caches the plan: the same object for the same class', () => {
    assert.equal(readPlan(Basic), readPlan(Basic));
  });

  it('puts base-class steps first and keeps an override at the base position', () => {
    class BaseAgent extends Agent {
      @Step() async load() {}
      @Step() async transform() {}
    }
    class Derived extends BaseAgent {
      @Step() async publish() {}
      @Step({ retries: 2 }) override async load() {}
    }
    @Pipeline({ name: 'plan-inherit', version: '1', agents: [Derived] })
    class Inherit {}
    const plan = readPlan(Inherit);
    assert.deepEqual(
      plan.steps.map((s) => [s.stepIndex, s.name]),
      [
        [0, 'load'],
        [1, 'transform'],
        [2, 'publish'],
      ],
    );
    assert.equal(plan.steps[0].retry.maxAttempts, 3, 'the override options win');
    assert.equal(plan.steps[0].agentId, 'Derived');
  });

  it('refuses a class without @Pipeline', () => {
    class NotAPipeline {}
    assert.throws(() => readPlan(NotAPipeline), definitionError('NotAPipeline is not a pipeline', '@Pipeline'));
  });

  it('refuses an agent with no @Step methods, naming pipeline and agent', () => {
    class Idle extends Agent {
      async notAStep() {}
    }
    @Pipeline({ name: 'plan-idle', version: '1', agents: [Research, Idle] })
    class IdlePipeline {}
    assert.throws(() => readPlan(IdlePipeline), definitionError("Pipeline 'plan-idle'", 'Idle', 'no @Step'));
    // a failed read is not cached as success
    assert.throws(() => readPlan(IdlePipeline), PipelineDefinitionError);
  });

  it('refuses two agents with the same id (same class twice)', () => {
    @Pipeline({ name: 'plan-twice', version: '1', agents: [Research, Research] })
    class Twice {}
    assert.throws(() => readPlan(Twice), definitionError("Pipeline 'plan-twice'", "two agents share the id 'Research'", 'agentId'));
  });

  it('refuses two agents whose static agentId collide', () => {
    class OtherWriter extends Agent {
      static agentId = 'writer';
      @Step() async other() {}
    }
    @Pipeline({ name: 'plan-collide', version: '1', agents: [Writer, OtherWriter] })
    class Collide {}
    assert.throws(() => readPlan(Collide), definitionError("two agents share the id 'writer'"));
  });

  it('refuses an agent class that does not extend Agent', () => {
    class Stranger {
      async go() {}
    }
    @Pipeline({ name: 'plan-stranger', version: '1', agents: [Stranger] })
    class WithStranger {}
    assert.throws(() => readPlan(WithStranger), definitionError("Pipeline 'plan-stranger'", 'agents[0] (Stranger) does not extend Agent'));
  });
});
