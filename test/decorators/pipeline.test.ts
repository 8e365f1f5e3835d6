import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Agent, Pipeline, Step, PipelineDefinitionError, parallel, loop, branch, forEach, readPlan, type PipelineOptions } from '../../src/index';
import { readPipeline } from '../../src/decorators/metadata';

function definitionError(...fragments: string[]) {
  return (err: unknown) => {
    assert.ok(err instanceof PipelineDefinitionError, `expected PipelineDefinitionError, got ${String(err)}`);
    assert.equal(err.code, 'PIPELINE_DEFINITION');
    for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
    return true;
  };
}

class One extends Agent {
  @Step() async a() {}
}
class Two extends Agent {
  @Step() async b() {}
}
class State {
  name = '';
}

/** Applies @Pipeline with options that the type system would reject. */
function decorate(options: unknown, name = 'Broken'): void {
  const target = { [name]: class {} }[name];
  Pipeline(options as PipelineOptions)(target);
}

describe('@Pipeline records metadata', () => {
  it('records name, version, agents in order, state and migrations', () => {
    const migration = { from: '0.9.0', to: '1.0.0', migrate: (c: never) => c };
    @Pipeline({ name: 'recorded', version: '1.0.0', agents: [Two, One], state: State, migrations: [migration] })
    class Recorded {}
    const meta = readPipeline(Recorded)!;
    assert.equal(meta.name, 'recorded');
    assert.equal(meta.version, '1.0.0');
    assert.deepEqual(meta.agents, [Two, One]);
    assert.equal(meta.state, State);
    assert.deepEqual(meta.migrations, [migration]);
  });

  it('defaults migrations to [] and copies the agents array (later edits do not leak in)', () => {
    const agents: PipelineOptions['agents'] = [One];
    @Pipeline({ name: 'copied', version: '1', agents })
    class Copied {}
    agents.push(Two);
    const meta = readPipeline(Copied)!;
    assert.deepEqual(meta.agents, [One]);
    assert.deepEqual(meta.migrations, []);
    assert.equal(meta.state, undefined);
  });

  it('leaves an undecorated class without metadata', () => {
    class Undecorated {}
    assert.equal(readPipeline(Undecorated), undefined);
  });
});

describe('@Pipeline misuse throws PipelineDefinitionError at decoration time', () => {
  it('without agents', () => {
    assert.throws(() => decorate({ name: 'p', version: '1' }, 'NoAgents'), definitionError('@Pipeline on NoAgents', 'at least one agent'));
  });

  it('with an empty agents list', () => {
    assert.throws(() => decorate({ name: 'p', version: '1', agents: [] }, 'EmptyAgents'), definitionError('@Pipeline on EmptyAgents', 'at least one agent'));
  });

  it('with a non-class agent (e.g. undefined from a circular import), naming its index', () => {
    assert.throws(() => decorate({ name: 'p', version: '1', agents: [One, undefined] }, 'Circular'), definitionError('@Pipeline on Circular', 'agents[1]', 'not a class'));
    assert.throws(() => decorate({ name: 'p', version: '1', agents: ['One'] }, 'Stringy'), definitionError('agents[0]', 'not a class'));
  });

  it('without a version', () => {
    assert.throws(() => decorate({ name: 'p', agents: [One] }, 'NoVersion'), definitionError('@Pipeline on NoVersion', 'version is required'));
    assert.throws(() => decorate({ name: 'p', version: '  ', agents: [One] }, 'BlankVersion'), definitionError('version is required'));
  });

  it('without a valid name', () => {
    assert.throws(() => decorate({ version: '1', agents: [One] }, 'NoName'), definitionError('@Pipeline on NoName', 'name'));
    assert.throws(() => decorate({ name: '', version: '1', agents: [One] }, 'EmptyName'), definitionError('name'));
    assert.throws(() => decorate({ name: 'has space', version: '1', agents: [One] }, 'SpacedName'), definitionError('name'));
  });

  it('with a state that is not a class', () => {
    assert.throws(() => decorate({ name: 'p', version: '1', agents: [One], state: { name: 'x' } }, 'BadState'), definitionError('@Pipeline on BadState', 'state'));
  });

  it('with no options at all', () => {
    assert.throws(() => decorate(undefined, 'NoOptions'), definitionError('@Pipeline on NoOptions'));
  });

  it('records nothing when it throws', () => {
    class Rejected {}
    assert.throws(() => Pipeline({ name: 'p', version: '', agents: [One] })(Rejected));
    assert.equal(readPipeline(Rejected), undefined);
  });
});

describe('@Pipeline checks control-flow constructs at decoration time', () => {
  it('names the construct and what is wrong with it', () => {
    assert.throws(() => decorate({ name: 'p', version: '1', agents: [parallel()] }, 'NoBranches'), definitionError('agents[0] (parallel)', 'at least one branch'));
    assert.throws(() => decorate({ name: 'p', version: '1', agents: [loop({ until: undefined as never }, One)] }, 'NoUntil'), definitionError('(loop)', 'until'));
    assert.throws(() => decorate({ name: 'p', version: '1', agents: [loop({ until: () => true, maxIterations: 0 }, One)] }, 'ZeroLoop'), definitionError('maxIterations >= 1'));
    assert.throws(() => decorate({ name: 'p', version: '1', agents: [loop({ until: () => true })] }, 'EmptyLoop'), definitionError('needs a body'));
    assert.throws(() => decorate({ name: 'p', version: '1', agents: [branch(() => 'a', { 'a/b': One })] }, 'SlashCase'), definitionError("case 'a/b'"));
    assert.throws(() => decorate({ name: 'p', version: '1', agents: [forEach(() => [], One, { into: 'bad name' })] }, 'BadInto'), definitionError('into'));
    assert.throws(
      () => decorate({ name: 'p', version: '1', agents: [forEach(() => [], One, { into: 'x', concurrency: 0 })] }, 'ZeroConcurrency'),
      definitionError('concurrency >= 1'),
    );
    assert.throws(
      () => decorate({ name: 'p', version: '1', agents: [parallel(One, [Two, undefined as never])] }, 'Nested'),
      definitionError('agents[0].branches[1][1]', 'not a class'),
    );
    // The same agent twice in one place would share its memory and its step paths.
    @Pipeline({ name: 'twice-in-a-branch', version: '1', agents: [parallel([One, One])] })
    class Twice {}
    assert.throws(() => readPlan(Twice), definitionError("agent 'One' appears twice"));
    // In two places it is two agents with two memories.
    @Pipeline({ name: 'two-places', version: '1', agents: [parallel(One, [Two, One])] })
    class TwoPlaces {}
    assert.deepEqual(
      readPlan(TwoPlaces).steps.map((s) => s.key),
      ['parallel[0]/One/a', 'parallel[1]/Two/b', 'parallel[1]/One/a'],
    );
  });
});
