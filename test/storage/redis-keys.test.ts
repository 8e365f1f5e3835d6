import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { decodeText, encodeStep, encodeText, nullableArg, rewriteArgs, stepFieldText } from '../../src/storage/redis/codec';
import { ALL_STATUSES, EVENTS_SUFFIX, redisKeys } from '../../src/storage/redis/keys';
import { legacyRedisStepEntry, stepRecord } from '../helpers/store-records';

describe('redis key builders', () => {
  it('default prefix layout', () => {
    const k = redisKeys();
    assert.equal(k.prefix, 'waypoint:');
    assert.equal(k.run('q3-aapl'), 'waypoint:run:{q3-aapl}');
    assert.equal(k.steps('q3-aapl'), 'waypoint:run:{q3-aapl}:steps');
    assert.equal(k.runOperations('q3-aapl'), 'waypoint:run:{q3-aapl}:ops');
    assert.equal(k.events('q3-aapl'), 'waypoint:run:{q3-aapl}:events');
    assert.equal(k.events('q3-aapl'), k.run('q3-aapl') + EVENTS_SUFFIX, 'the retention script builds it from the run key');
    assert.equal(k.operation('q3-aapl/research/send#0'), 'waypoint:op:q3-aapl/research/send#0');
    assert.equal(k.runsIndex(), 'waypoint:idx:runs');
    assert.equal(k.statusIndex('paused'), 'waypoint:idx:status:paused');
    assert.equal(k.pipelineIndex('financial-analysis'), 'waypoint:idx:pipeline:financial-analysis');
  });

  it('custom prefix applies to every key', () => {
    const k = redisKeys('t-1:');
    for (const key of [k.run('r'), k.steps('r'), k.runOperations('r'), k.operation('o'), k.runsIndex(), k.statusIndex('running'), k.pipelineIndex('p')]) {
      assert.ok(key.startsWith('t-1:'), key);
    }
  });

  it('per-run keys share the {runId} hash tag', () => {
    const k = redisKeys();
    const tag = (key: string) => /\{([^}]*)\}/.exec(key)?.[1];
    for (const key of [k.run('abc'), k.steps('abc'), k.runOperations('abc'), k.events('abc')]) assert.equal(tag(key), 'abc');
  });

  it('the stems the scripts complete equal the builders applied to a value', () => {
    const k = redisKeys('x:');
    assert.equal(k.stems.status + 'failed', k.statusIndex('failed'));
    assert.equal(k.stems.pipeline + 'my:pipe', k.pipelineIndex('my:pipe'));
    assert.equal(k.stems.operation + 'op/1', k.operation('op/1'));
    assert.equal(k.stems.parent + 'run/1', k.parentIndex('run/1'));
  });

  it('distinct ids never collide, even with braces and separators in them', () => {
    const k = redisKeys();
    const ids = ['a', 'a}', 'a}:steps', 'a:steps', '{a}', 'a}:ops', '', ':ops', 'run:{a}'];
    const all = ids.flatMap((id) => [k.run(id), k.steps(id), k.runOperations(id), k.operation(id), k.pipelineIndex(id), k.parentIndex(id)]);
    assert.equal(new Set(all).size, all.length);
  });

  it('ALL_STATUSES lists every run status once', () => {
    assert.deepEqual([...ALL_STATUSES].sort(), ['cancelled', 'completed', 'failed', 'paused', 'running', 'waiting']);
  });
});

describe('redis text codec', () => {
  it('stores well-formed text as is', () => {
    for (const text of ['', '{"a":1}', 'héllo wörld ✓ 𝄞 🚀', 'x'.repeat(10_000)]) assert.equal(encodeText(text), text);
  });

  it('escapes what UTF-8 cannot carry, and the marker itself, and decodes back exactly', () => {
    for (const text of ['lone \uD800 high', 'lone \uDC00 low', '\u0000wp-json:"looks escaped"', '\uDBFF']) {
      const stored = encodeText(text);
      assert.notEqual(stored, text);
      assert.ok(Buffer.from(stored, 'utf8').toString('utf8') === stored, 'stored form survives UTF-8');
      assert.equal(decodeText(stored), text);
    }
  });

  it('nullable arguments: unchanged, cleared, set', () => {
    assert.equal(nullableArg(undefined), '');
    assert.equal(nullableArg(null), '0');
    assert.equal(nullableArg(''), '1');
    assert.equal(nullableArg('hint'), '1hint');
  });
});

describe('redis payload rewrite arguments', () => {
  const tricky = ['{"n":1}', 'a","memory":"b', 'x\\"y\\\\', 'lone \uD800', '🚀 ünï \u2028', '"output":"{}","memory":', ''];

  it("a step field's text occurs in its entry exactly once, and only when the value is equal, in both entry formats", () => {
    const occurrences = (text: string, part: string) => text.split(part).length - 1;
    const withKeys = [...tricky, '"o":"{}","m":', '","k":"'];
    for (const output of withKeys) {
      for (const memory of [...withKeys, null]) {
        const step = stepRecord('r', 1, { output, memory });
        for (const [format, entry] of [
          ['short', encodeStep(step)],
          ['legacy', legacyRedisStepEntry(step)],
        ] as const) {
          const text = (field: 'output' | 'memory', value: string) => stepFieldText(field, value, format);
          const otherFormat = format === 'short' ? 'legacy' : 'short';
          assert.equal(occurrences(entry, text('output', output)), 1, `${format} output ${JSON.stringify(output)}`);
          assert.equal(entry.includes(stepFieldText('output', output, otherFormat)), false, `${format} entry holds no ${otherFormat} key text`);
          if (memory !== null) assert.equal(occurrences(entry, text('memory', memory)), 1, `${format} memory ${JSON.stringify(memory)}`);
          for (const other of withKeys) {
            if (other !== output) assert.equal(entry.includes(text('output', other)), false, `output ${JSON.stringify(other)} in ${entry}`);
            if (other !== memory) assert.equal(entry.includes(text('memory', other)), false, `memory ${JSON.stringify(other)} in ${entry}`);
          }
        }
      }
    }
  });

  it('five arguments per swap, each value in its stored form', () => {
    assert.deepEqual(
      rewriteArgs({
        input: { from: 'a', to: 'lone \uD800' },
        steps: [{ sequence: 7, memory: { from: 'm', to: 'n' } }],
        operations: [{ operationKey: 'op/1', error: { from: 'e', to: 'f' } }],
      }),
      ['run', '', 'input', 'a', encodeText('lone \uD800'), 'step', '7', 'memory', '"m"', '"n"', 'op', 'op/1', 'error', 'e', 'f'],
    );
    assert.deepEqual(rewriteArgs({}), []);
  });
});
