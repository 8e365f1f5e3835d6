import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { ContainerModule, injectable } from 'inversify';
import { Agent, Pipeline, Step, Waypoint, memoryStorage, type WaypointError } from '../../src/index';

class Llm {
  complete(): string {
    return 'answer';
  }
}

@injectable()
class Researcher extends Agent {
  constructor(private readonly llm: Llm) {
    super();
  }
  @Step() ask() {
    return { answer: this.llm.complete() };
  }
}
@Pipeline({ name: 'needs-llm', version: '1', agents: [Researcher] })
class NeedsLlm {}

// What an esbuild-based runner (tsx, vitest's default transform) leaves: the class and its decorators,
// but no recorded constructor parameter types. Decorators applied by hand get no design:paramtypes.
class Untyped extends Agent {
  constructor(private readonly llm: Llm) {
    super();
  }
  ask() {
    return { answer: this.llm.complete() };
  }
}
Step()(Untyped.prototype, 'ask', Object.getOwnPropertyDescriptor(Untyped.prototype, 'ask')!);
injectable()(Untyped);
@Pipeline({ name: 'untyped', version: '1', agents: [Untyped] })
class UntypedPipeline {}

describe('dependency-injection mistakes are INJECTION_FAILED naming the agent, the parameter and the remedy', () => {
  it('an unbound constructor dependency', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    await assert.rejects(waypoint.run(NeedsLlm, { runId: 'unbound', input: {} }), (e: WaypointError) => {
      assert.equal(e.code, 'INJECTION_FAILED');
      assert.match(e.message, /^Agent 'Researcher' of run 'unbound' could not be created: its constructor parameter 1 \(of type Llm\) is not bound/);
      assert.match(e.message, /Waypoint\.create\(\{ modules \}\)/);
      return true;
    });
    await waypoint.close();
  });

  it('the same pipeline runs once the dependency is bound', async () => {
    const llm = new ContainerModule(({ bind }) => {
      bind(Llm).toSelf();
    });
    const waypoint = await Waypoint.create({ modules: [memoryStorage(), llm] });
    const result = await waypoint.run(NeedsLlm, { runId: 'bound', input: {} });
    assert.equal(result.status, 'completed');
    assert.equal(result.state.answer, 'answer');
    await waypoint.close();
  });

  it('a constructor without recorded parameter types (no decorator metadata)', async () => {
    const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
    await assert.rejects(waypoint.run(UntypedPipeline, { runId: 'untyped', input: {} }), (e: WaypointError) => {
      assert.equal(e.code, 'INJECTION_FAILED');
      assert.match(e.message, /^Agent 'Untyped' of run 'untyped' could not be created: its constructor takes 1 parameter\(s\) but only 0 have recorded types/);
      assert.match(e.message, /emitDecoratorMetadata/);
      assert.match(e.message, /tsx/);
      return true;
    });
    // A second try meets the same error, not a half-made binding.
    await assert.rejects(waypoint.run(UntypedPipeline, { runId: 'untyped', input: {} }), { code: 'INJECTION_FAILED' });
    await waypoint.close();
  });
});
