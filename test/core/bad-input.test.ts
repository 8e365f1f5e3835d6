import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it, beforeEach } from 'node:test';
import { ContainerModule } from 'inversify';
import { IsInt, IsOptional, IsString, Matches, Min, ValidateNested } from 'class-validator';
import {
  Agent,
  MemoryCheckpointStore,
  Pipeline,
  Step,
  TOKENS,
  Waypoint,
  WaypointError,
  InvalidStateError,
  SerializationError,
  type Logger,
  type StepContext,
} from '../../src/index';

const silent: Logger = { debug() {}, info() {}, warn() {}, error() {} };

function storeModule(store: MemoryCheckpointStore): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
    bind(TOKENS.Logger).toConstantValue(silent);
  });
}

async function setup(store = new MemoryCheckpointStore()): Promise<{ waypoint: Waypoint; store: MemoryCheckpointStore }> {
  return { waypoint: await Waypoint.create({ modules: [storeModule(store)] }), store };
}

/** Matches a WaypointError by code and message fragments. */
function waypointError(code: string, ...fragments: string[]) {
  return (err: unknown) => {
    assert.ok(err instanceof WaypointError, `expected a WaypointError, got ${String(err)}`);
    assert.equal(err.code, code, `code of: ${err.message}`);
    for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
    return true;
  };
}

class OrderState {
  @IsString() name!: string;
  @IsInt() @Min(0) count = 0;
}

class Client {
  url = 'http://example';
  fetch() {
    return this.url;
  }
}

type Mode = 'ok' | 'function' | 'function-field' | 'instance' | 'circular' | 'array' | 'number' | 'string' | 'invalid-state' | 'map';
let mode: Mode = 'ok';
let calls: string[] = [];

class Producer extends Agent {
  @Step() prepare(ctx: StepContext<OrderState>) {
    calls.push('prepare');
    return { count: ctx.state.count + 1 };
  }

  @Step() produce(ctx: StepContext<OrderState>): unknown {
    calls.push('produce');
    switch (mode) {
      case 'function':
        return () => 1;
      case 'function-field':
        return { count: 2, callback: () => 1 };
      case 'instance':
        return new Client();
      case 'circular': {
        const out: Record<string, unknown> = { count: 2 };
        out.self = out;
        return out;
      }
      case 'array':
        return [{ count: 2 }];
      case 'number':
        return 42;
      case 'string':
        return 'done';
      case 'invalid-state':
        return { count: -5 };
      case 'map':
        return new Map([['count', 3]]);
      default:
        return { count: ctx.state.count + 10 };
    }
  }
}

@Pipeline({ name: 'bad-input', version: '1.0.0', state: OrderState, agents: [Producer] })
class BadInputPipeline {}

@Pipeline({ name: 'other-pipeline', version: '1.0.0', agents: [Producer] })
class OtherPipeline {}

beforeEach(() => {
  mode = 'ok';
  calls = [];
});

describe('bad pipeline input changes nothing', () => {
  it('invalid input state: INVALID_STATE with issues, no run written', async () => {
    const { waypoint, store } = await setup();
    await assert.rejects(waypoint.run(BadInputPipeline, { runId: 'in-1', input: { name: 5, count: -1 } }), (err: unknown) => {
      assert.ok(err instanceof InvalidStateError);
      assert.equal(err.code, 'INVALID_STATE');
      assert.equal(err.runId, 'in-1');
      assert.deepEqual(err.issues.map((i) => i.property).sort(), ['count', 'name']);
      assert.ok(err.message.includes("run 'in-1'"), err.message);
      return true;
    });
    assert.equal(await waypoint.get('in-1'), null);
    assert.deepEqual(await store.listRuns(), []);
    assert.deepEqual(calls, []);
  });

  for (const [label, input] of [
    ['null', null],
    ['an array', [{ name: 'x' }]],
    ['a string', 'x'],
  ] as const) {
    it(`input that is ${label}: INVALID_STATE, no run written`, async () => {
      const { waypoint } = await setup();
      await assert.rejects(
        waypoint.run(BadInputPipeline, { runId: 'in-2', input: input as unknown as Record<string, unknown> }),
        waypointError('INVALID_STATE', 'must be an object'),
      );
      assert.equal(await waypoint.get('in-2'), null);
    });
  }

  it('invalid input smuggled past validation by an own "__proto__" key: INVALID_STATE, no run written', async () => {
    const { waypoint } = await setup();
    // e.g. a request body parsed with JSON.parse; name is invalid (a number)
    const input = JSON.parse('{"__proto__":{"name":"ok"},"name":42}') as Record<string, unknown>;
    await assert.rejects(waypoint.run(BadInputPipeline, { runId: 'in-proto', input }), (err: unknown) => {
      assert.ok(err instanceof InvalidStateError, `expected InvalidStateError, got ${String(err)}`);
      assert.ok(err.issues.some((i) => i.property === 'name'));
      return true;
    });
    assert.equal(await waypoint.get('in-proto'), null, 'the run was written before its input was validated');
    assert.deepEqual(calls, []);
  });

  it('unserializable input (a function): UNSERIALIZABLE_VALUE naming the path, no run written', async () => {
    const { waypoint } = await setup();
    await assert.rejects(waypoint.run(BadInputPipeline, { runId: 'in-3', input: { name: 'x', onDone: () => 1 } }), waypointError('UNSERIALIZABLE_VALUE', "run 'in-3'", '$.onDone'));
    assert.equal(await waypoint.get('in-3'), null);
  });

  it('no input for a run that does not exist: INVALID_STATE, nothing written', async () => {
    const { waypoint } = await setup();
    await assert.rejects(waypoint.run(BadInputPipeline, { runId: 'in-4' }), waypointError('INVALID_STATE', "'in-4'", 'no input'));
    assert.equal(await waypoint.get('in-4'), null);
  });

  it("runId '' (and a non-string) is INVALID_RUN_ID for run, resume and get", async () => {
    const { waypoint, store } = await setup();
    await assert.rejects(waypoint.run(BadInputPipeline, { runId: '', input: { name: 'x' } }), waypointError('INVALID_RUN_ID', 'runId'));
    await assert.rejects(waypoint.run(BadInputPipeline, { runId: 42 as unknown as string, input: { name: 'x' } }), waypointError('INVALID_RUN_ID'));
    await assert.rejects(waypoint.resume(''), waypointError('INVALID_RUN_ID'));
    await assert.rejects(waypoint.get(''), waypointError('INVALID_RUN_ID'));
    assert.deepEqual(await store.listRuns(), []);
  });
});

describe('unknown and mismatched runs', () => {
  it("resume('nope') is RUN_NOT_FOUND; get('nope') is null", async () => {
    const { waypoint } = await setup();
    await assert.rejects(waypoint.resume('nope'), (err: unknown) => {
      assert.ok(err instanceof WaypointError);
      assert.equal(err.code, 'RUN_NOT_FOUND');
      assert.equal(err.runId, 'nope');
      assert.ok(err.message.includes("Run 'nope' does not exist"), err.message);
      return true;
    });
    assert.equal(await waypoint.get('nope'), null);
    await assert.rejects(waypoint.checkpoint('nope'), waypointError('RUN_NOT_FOUND'));
  });

  it('running an existing run id with another pipeline is PIPELINE_MISMATCH and changes nothing', async () => {
    const { waypoint, store } = await setup();
    await waypoint.run(BadInputPipeline, { runId: 'mm-1', input: { name: 'x' } });
    const before = await store.loadRun('mm-1');
    calls = [];
    await assert.rejects(waypoint.run(OtherPipeline, { runId: 'mm-1', input: { name: 'x' } }), waypointError('PIPELINE_MISMATCH', "Run 'mm-1'", "'bad-input'", "'other-pipeline'"));
    await assert.rejects(waypoint.run(OtherPipeline, { runId: 'mm-1' }), waypointError('PIPELINE_MISMATCH'));
    assert.deepEqual(calls, []);
    assert.deepEqual(await store.loadRun('mm-1'), before);
  });

  it('running an existing run id with a different input is INPUT_MISMATCH; the same input resumes', async () => {
    const { waypoint, store } = await setup();
    await waypoint.run(BadInputPipeline, { runId: 'mm-2', input: { name: 'x' } });
    const before = await store.loadRun('mm-2');
    calls = [];
    await assert.rejects(waypoint.run(BadInputPipeline, { runId: 'mm-2', input: { name: 'y' } }), waypointError('INPUT_MISMATCH', "Run 'mm-2'"));
    assert.deepEqual(await store.loadRun('mm-2'), before);
    const same = await waypoint.run(BadInputPipeline, { runId: 'mm-2', input: { name: 'x' } });
    assert.equal(same.status, 'completed');
    assert.equal(same.stepsExecuted, 0);
    assert.deepEqual(calls, []);
  });

  it('resume of a run whose pipeline this Waypoint does not know is PIPELINE_NOT_REGISTERED', async () => {
    const store = new MemoryCheckpointStore();
    const first = await setup(store);
    mode = 'number'; // leave the run failed, so a resume would have work to do
    await assert.rejects(first.waypoint.run(BadInputPipeline, { runId: 'nr-1', input: { name: 'x' } }));
    const second = await setup(store);
    await assert.rejects(second.waypoint.resume('nr-1'), waypointError('PIPELINE_NOT_REGISTERED', "Run 'nr-1'", "'bad-input'", 'register'));
    const registered = await Waypoint.create({ modules: [storeModule(store)], pipelines: [BadInputPipeline] });
    mode = 'ok';
    assert.equal((await registered.resume('nr-1')).status, 'completed');
  });
});

describe('a bad step output is refused, names the step, records nothing, and the run can be resumed once fixed', () => {
  const cases: [Mode, string, string[]][] = [
    ['function', 'UNSERIALIZABLE_VALUE', ['returned a function']],
    ['function-field', 'UNSERIALIZABLE_VALUE', ['$.callback', 'function']],
    ['instance', 'UNSERIALIZABLE_VALUE', ['Client']],
    ['circular', 'UNSERIALIZABLE_VALUE', ['$.self', 'circular']],
    ['array', 'UNSERIALIZABLE_VALUE', ['returned an array', 'partial state object']],
    ['number', 'UNSERIALIZABLE_VALUE', ['returned a number', 'partial state object']],
    ['string', 'UNSERIALIZABLE_VALUE', ['returned a string']],
    ['invalid-state', 'INVALID_STATE', ["Step 'Producer/produce' of run", 'produced an invalid state', 'count']],
    ['map', 'UNSERIALIZABLE_VALUE', []],
  ];
  for (const [bad, code, fragments] of cases) {
    it(`a step returning ${bad}: ${code}`, async () => {
      const { waypoint, store } = await setup();
      const runId = `out-${bad}`;
      mode = bad;
      await assert.rejects(waypoint.run(BadInputPipeline, { runId, input: { name: 'x' } }), (err: unknown) => {
        assert.ok(err instanceof WaypointError, `expected a WaypointError, got ${String(err)}`);
        assert.equal(err.code, code, err.message);
        assert.equal(err.step, 'Producer/produce');
        assert.equal(err.runId, runId);
        assert.ok(err.message.includes('Producer/produce'), err.message);
        assert.ok(err.message.includes(`run '${runId}'`), err.message);
        for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
        if (code === 'INVALID_STATE')
          assert.deepEqual(
            (err as InvalidStateError).issues.map((i) => i.property),
            ['count'],
          );
        if (code === 'UNSERIALIZABLE_VALUE') assert.ok(err instanceof SerializationError);
        return true;
      });
      // only the first step is recorded; the bad one left no row and did not move the cursor
      const steps = await store.listSteps(runId);
      assert.deepEqual(
        steps.map((s) => s.stepName),
        ['prepare'],
      );
      const info = await waypoint.get(runId);
      assert.equal(info!.status, 'failed');
      assert.equal(info!.lastSequence, 1);
      assert.deepEqual(info!.cursor, { agentIndex: 0, stepIndex: 1 });
      assert.equal((info!.error as { code: string }).code, code);
      assert.ok(info!.resumeHint?.includes(`waypoint.resume('${runId}')`));
      assert.deepEqual(calls, ['prepare', 'produce'], 'refused output is not retried');

      mode = 'ok';
      calls = [];
      const resumed = await waypoint.resume<OrderState>(runId);
      assert.equal(resumed.status, 'completed');
      assert.deepEqual(calls, ['produce'], 'the recorded first step is not run again');
      assert.equal(resumed.stepsSkipped, 1);
      assert.equal(resumed.stepsExecuted, 1);
      assert.equal(resumed.state.count, 11);
      assert.equal(resumed.lastSequence, 2);
    });
  }
});

describe('unserializable agent memory', () => {
  let poison = false;
  class Remembering extends Agent<Record<string, unknown>> {
    @Step() remember() {
      if (poison) this.memory = { ...this.memory, handler: () => 1 };
      return { count: 1 };
    }
  }
  @Pipeline({ name: 'bad-memory-after', version: '1', state: OrderState, agents: [Remembering] })
  class BadMemoryAfter {}

  it('memory made unserializable by a step: UNSERIALIZABLE_VALUE naming agent and step, nothing recorded', async () => {
    const { waypoint, store } = await setup();
    poison = true;
    await assert.rejects(
      waypoint.run(BadMemoryAfter, { runId: 'mem-1', input: { name: 'x' } }),
      waypointError('UNSERIALIZABLE_VALUE', "memory of agent 'Remembering'", "step 'Remembering/remember'", "run 'mem-1'", '$.handler'),
    );
    assert.deepEqual(await store.listSteps('mem-1'), []);
    assert.equal((await waypoint.get('mem-1'))!.status, 'failed');
    poison = false;
    assert.equal((await waypoint.resume('mem-1')).status, 'completed');
  });

  class BornBroken extends Agent<Record<string, unknown>> {
    override memory: Record<string, unknown> = { handler: () => 1 };
    @Step() work() {
      return { count: 1 };
    }
  }
  @Pipeline({ name: 'bad-memory-initial', version: '1', state: OrderState, agents: [BornBroken] })
  class BadMemoryInitial {}

  it('unserializable initial memory: the error names the run id (not the pipeline name)', async () => {
    const { waypoint, store } = await setup();
    await assert.rejects(waypoint.run(BadMemoryInitial, { runId: 'mem-2', input: { name: 'x' } }), waypointError('UNSERIALIZABLE_VALUE', "run 'mem-2'", "agent 'BornBroken'"));
    assert.deepEqual(await store.listSteps('mem-2'), []);
  });
});

describe('nested state validation after a step', () => {
  class Address {
    @Matches(/^\d{5}$/) zip!: string;
  }
  class ShippingState {
    @IsString() name!: string;
    @IsOptional() @ValidateNested() address?: Address;
  }
  class Shipper extends Agent {
    @Step() locate() {
      return { address: { zip: 'not-a-zip' } };
    }
  }
  @Pipeline({ name: 'nested-validation', version: '1', state: ShippingState, agents: [Shipper] })
  class NestedValidation {}

  it('a step output with an invalid nested object is INVALID_STATE naming the nested path, nothing recorded', async () => {
    const { waypoint, store } = await setup();
    await assert.rejects(waypoint.run(NestedValidation, { runId: 'nested-1', input: { name: 'x' } }), (err: unknown) => {
      assert.ok(err instanceof InvalidStateError, `expected InvalidStateError, got ${String(err)}`);
      assert.ok(
        err.issues.some((i) => i.property === 'address.zip'),
        JSON.stringify(err.issues),
      );
      return true;
    });
    assert.deepEqual(await store.listSteps('nested-1'), []);
  });
});
