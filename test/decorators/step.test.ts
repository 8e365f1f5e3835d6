import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { Agent, Step, PipelineDefinitionError, type RetryPolicy, type StepOptions } from '../../src/index';
import { readOwnSteps } from '../../src/decorators/metadata';

/** Asserts a PipelineDefinitionError whose message contains every fragment. */
function definitionError(...fragments: (string | RegExp)[]) {
  return (err: unknown) => {
    assert.ok(err instanceof PipelineDefinitionError, `expected PipelineDefinitionError, got ${String(err)}`);
    assert.equal(err.code, 'PIPELINE_DEFINITION');
    for (const f of fragments) {
      if (typeof f === 'string') assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
      else assert.match(err.message, f);
    }
    return true;
  };
}

describe('@Step records metadata', () => {
  it('records steps in declaration order (not alphabetical), with the method name as default name', () => {
    class Ordered extends Agent {
      @Step() async zeta() {}
      @Step() async alpha() {}
      @Step({ name: 'custom-name' }) async middle() {}
      async notAStep() {}
    }
    const steps = readOwnSteps(Ordered);
    assert.deepEqual(
      steps.map((s) => [s.method, s.options.name]),
      [
        ['zeta', 'zeta'],
        ['alpha', 'alpha'],
        ['middle', 'custom-name'],
      ],
    );
  });

  it('records retries (number and policy) and timeoutMs as given', () => {
    const policy: RetryPolicy = { maxAttempts: 5, initialDelayMs: 10, maxDelayMs: 100, factor: 3, jitter: false };
    class WithOptions extends Agent {
      @Step({ retries: 3, timeoutMs: 500 }) async numeric() {}
      @Step({ retries: policy }) async withPolicy() {}
      @Step({ retries: 0 }) async none() {}
    }
    const [numeric, withPolicy, none] = readOwnSteps(WithOptions);
    assert.deepEqual(numeric.options, { retries: 3, timeoutMs: 500, name: 'numeric' });
    assert.deepEqual(withPolicy.options.retries, policy);
    assert.equal(none.options.retries, 0);
  });

  it('records only own steps per class (inheritance is resolved by the plan reader)', () => {
    class Base extends Agent {
      @Step() async a() {}
    }
    class Child extends Base {
      @Step() async b() {}
    }
    assert.deepEqual(
      readOwnSteps(Base).map((s) => s.method),
      ['a'],
    );
    assert.deepEqual(
      readOwnSteps(Child).map((s) => s.method),
      ['b'],
    );
  });

  it('does not change the decorated method', () => {
    class Plainly extends Agent {
      @Step() go() {
        return { ok: 1 };
      }
    }
    assert.deepEqual(new Plainly().go(), { ok: 1 });
  });
});

describe('@Step misuse throws PipelineDefinitionError at decoration time', () => {
  it('on a class that does not extend Agent, naming class and method', () => {
    assert.throws(
      () => {
        class NotAnAgent {
          @Step() async go() {}
        }
        return NotAnAgent;
      },
      definitionError('@Step on NotAnAgent.go', 'does not extend Agent'),
    );
  });

  it('on two methods with the same step name', () => {
    assert.throws(
      () => {
        class Dup extends Agent {
          @Step({ name: 'fetch' }) async one() {}
          @Step({ name: 'fetch' }) async two() {}
        }
        return Dup;
      },
      definitionError('@Step on Dup.two', "already has a step named 'fetch'"),
    );
  });

  it('when an explicit name collides with another method used as a step name', () => {
    assert.throws(
      () => {
        class Dup2 extends Agent {
          @Step() async fetch() {}
          @Step({ name: 'fetch' }) async other() {}
        }
        return Dup2;
      },
      definitionError('Dup2.other', "'fetch'"),
    );
  });

  for (const bad of ['', 'has space', 'slash/inside']) {
    it(`on an invalid step name ${JSON.stringify(bad)}`, () => {
      assert.throws(
        () => {
          class BadName extends Agent {
            @Step({ name: bad }) async go() {}
          }
          return BadName;
        },
        definitionError('@Step on BadName.go', 'step name'),
      );
    });
  }

  const badRetries: [string, StepOptions['retries'], string][] = [
    ['negative', -1, 'retries must be a whole number'],
    ['fractional', 1.5, 'retries must be a whole number'],
    ['NaN', Number.NaN, 'retries must be a whole number'],
    ['maxAttempts 0', { maxAttempts: 0 }, 'retries.maxAttempts'],
    ['maxAttempts 2.5', { maxAttempts: 2.5 }, 'retries.maxAttempts'],
    ['negative initialDelayMs', { initialDelayMs: -5 }, 'retries.initialDelayMs'],
    ['NaN maxDelayMs', { maxDelayMs: Number.NaN }, 'retries.maxDelayMs'],
    ['factor below 1', { factor: 0.5 }, 'retries.factor'],
    ['retryOn not a function', { retryOn: 'yes' as unknown as RetryPolicy['retryOn'] }, 'retries.retryOn'],
  ];
  for (const [label, retries, fragment] of badRetries) {
    it(`on bad retries: ${label}`, () => {
      assert.throws(
        () => {
          class BadRetries extends Agent {
            @Step({ retries }) async go() {}
          }
          return BadRetries;
        },
        definitionError('@Step on BadRetries.go', fragment),
      );
    });
  }

  for (const timeoutMs of [0, -10, Number.NaN, Number.POSITIVE_INFINITY]) {
    it(`on bad timeoutMs ${String(timeoutMs)}`, () => {
      assert.throws(
        () => {
          class BadTimeout extends Agent {
            @Step({ timeoutMs }) async go() {}
          }
          return BadTimeout;
        },
        definitionError('@Step on BadTimeout.go', 'timeoutMs'),
      );
    });
  }

  it('on an accessor (not a method)', () => {
    assert.throws(
      () => {
        class Accessor extends Agent {
          @Step() get value() {
            return 1;
          }
        }
        return Accessor;
      },
      definitionError('@Step on Accessor.value', 'only methods'),
    );
  });

  it('records nothing for a rejected step', () => {
    class Partial extends Agent {
      @Step() async ok() {}
    }
    assert.throws(() => Step({ timeoutMs: -1 })(Partial.prototype, 'ok2', { value: async () => {} }));
    assert.deepEqual(
      readOwnSteps(Partial).map((s) => s.method),
      ['ok'],
    );
  });
});
