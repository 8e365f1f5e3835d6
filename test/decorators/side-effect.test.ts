import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { SideEffect, PipelineDefinitionError, WaypointError, type SideEffectOptions } from '../../src/index';

function definitionError(...fragments: string[]) {
  return (err: unknown) => {
    assert.ok(err instanceof PipelineDefinitionError, `expected PipelineDefinitionError, got ${String(err)}`);
    assert.equal(err.code, 'PIPELINE_DEFINITION');
    for (const f of fragments) assert.ok(err.message.includes(f), `message ${JSON.stringify(err.message)} lacks ${JSON.stringify(f)}`);
    return true;
  };
}

describe('@SideEffect', () => {
  it('wraps the method: outside a run the call rejects with SIDE_EFFECT_OUTSIDE_RUN and the body does not run', async () => {
    let ran = 0;
    class Mailer {
      @SideEffect({ name: 'send-mail' }) send(): Promise<void> {
        ran += 1;
        return Promise.resolve();
      }
    }
    await assert.rejects(new Mailer().send(), (err: WaypointError) => {
      assert.equal(err.code, 'SIDE_EFFECT_OUTSIDE_RUN');
      assert.ok(err.message.includes('send-mail'));
      assert.ok(err.message.includes('Mailer.send'));
      return true;
    });
    assert.equal(ran, 0);
  });
});

describe('@SideEffect misuse throws PipelineDefinitionError at decoration time', () => {
  it('with a reconcile that is not a function', () => {
    assert.throws(
      () => {
        class BadReconcile {
          @SideEffect({ reconcile: 'yes' } as unknown as SideEffectOptions) async send() {}
        }
        return BadReconcile;
      },
      definitionError('@SideEffect on BadReconcile.send', 'reconcile'),
    );
  });

  it('with bad retries', () => {
    assert.throws(
      () => {
        class BadRetries {
          @SideEffect({ retries: -2 }) async send() {}
        }
        return BadRetries;
      },
      definitionError('@SideEffect on BadRetries.send', 'retries'),
    );
  });

  it('with an empty name', () => {
    assert.throws(
      () => {
        class EmptyName {
          @SideEffect({ name: '' }) async send() {}
        }
        return EmptyName;
      },
      definitionError('@SideEffect on EmptyName.send', 'name'),
    );
  });

  it('on an accessor', () => {
    assert.throws(
      () => {
        class Getter {
          @SideEffect() get value() {
            return 1;
          }
        }
        return Getter;
      },
      definitionError('@SideEffect on Getter.value', 'only methods'),
    );
  });
});
