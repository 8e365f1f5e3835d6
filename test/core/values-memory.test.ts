import { execFileSync } from 'node:child_process';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { MemoryCheckpointStore, TOKENS } from '../../src/index';
import { ContainerModule } from 'inversify';
import { defineValuesSuite } from './values-suite';

/** One memory store for the whole suite: every Waypoint of it (a "fresh reader") binds the same one. */
function sharedMemory(store: MemoryCheckpointStore): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(store);
  });
}

defineValuesSuite(() => {
  const store = new MemoryCheckpointStore();
  return Promise.resolve({ name: 'memory', modules: () => [sharedMemory(store)], dispose: () => Promise.resolve() });
});

describe('the depth limit is a count, not the stack', () => {
  it('refuses the same values in a process with --stack-size=4000, and accepts the same', () => {
    const serializer = require.resolve('../../src/core/state/serializer');
    const decoder = require.resolve('../../src/core/state/value-decoder');
    const script = `
      const { serialize } = require(${JSON.stringify(serializer)});
      const { deserialize, MAX_VALUE_DEPTH } = require(${JSON.stringify(decoder)});
      const nest = (n) => { let v = 1; for (let i = 0; i < n; i++) v = [v]; return v; };
      const out = [];
      for (const n of [MAX_VALUE_DEPTH, MAX_VALUE_DEPTH + 1, 2500]) {
        try { deserialize(serialize(nest(n))); out.push('ok'); } catch (e) { out.push(e.code || e.name); }
      }
      process.stdout.write(out.join(','));`;
    for (const flags of [[], ['--stack-size=4000']]) {
      const printed = execFileSync(process.execPath, [...flags, '-e', script], { encoding: 'utf8' });
      assert.equal(printed, 'ok,UNSERIALIZABLE_VALUE,UNSERIALIZABLE_VALUE', `with ${flags.join(' ') || 'the default stack'}`);
    }
  });
});
