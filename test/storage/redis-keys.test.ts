import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { decodeText, encodeText, nullableArg } from '../../src/storage/redis/codec';
import { ALL_STATUSES, redisKeys } from '../../src/storage/redis/keys';

describe('redis key builders', () => {
  it('default prefix layout', () => {
    const k = redisKeys();
    assert.equal(k.prefix, 'waypoint:');
    assert.equal(k.run('q3-aapl'), 'waypoint:run:{q3-aapl}');
    assert.equal(k.steps('q3-aapl'), 'waypoint:run:{q3-aapl}:steps');
    assert.equal(k.runOperations('q3-aapl'), 'waypoint:run:{q3-aapl}:ops');
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
    for (const key of [k.run('abc'), k.steps('abc'), k.runOperations('abc')]) assert.equal(tag(key), 'abc');
  });

  it('the stems the scripts complete equal the builders applied to a value', () => {
    const k = redisKeys('x:');
    assert.equal(k.stems.status + 'failed', k.statusIndex('failed'));
    assert.equal(k.stems.pipeline + 'my:pipe', k.pipelineIndex('my:pipe'));
    assert.equal(k.stems.operation + 'op/1', k.operation('op/1'));
  });

  it('distinct ids never collide, even with braces and separators in them', () => {
    const k = redisKeys();
    const ids = ['a', 'a}', 'a}:steps', 'a:steps', '{a}', 'a}:ops', '', ':ops', 'run:{a}'];
    const all = ids.flatMap((id) => [k.run(id), k.steps(id), k.runOperations(id), k.operation(id), k.pipelineIndex(id)]);
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
