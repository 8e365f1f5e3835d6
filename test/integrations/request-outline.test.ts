import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { describeDifference, firstDifference, outlineOf, TAIL } from '../../src/integrations/request-outline';
import { serialize } from '../../src/core/state/serializer';

const messages = (n: number, changed?: number) =>
  Array.from({ length: n }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', text: i === changed ? `changed ${i}` : `message ${i}` }));
const request = (n: number, changed?: number, extra: Record<string, unknown> = {}) => ({ model: 'm-1', params: { temperature: 0, messages: messages(n, changed), ...extra } });

describe('request outline: what a record keeps to explain a changed request', () => {
  it('an equal request has no difference; a changed setting or model is named by its path', () => {
    const recorded = outlineOf(request(5));
    assert.equal(firstDifference(recorded, request(5)), undefined);
    assert.deepEqual(firstDifference(recorded, { ...request(5), model: 'm-2' }), { path: ['model'], now: 'm-2' });
    const setting = firstDifference(recorded, request(5, undefined, { temperature: 1 }))!;
    assert.equal(describeDifference(setting), 'request.params.temperature differs; now: 1');
    assert.deepEqual(firstDifference(recorded, request(5, undefined, { seed: 7 }))?.path, ['params', 'seed']);
  });

  it('a message in the tail is located exactly, with the counts when the array grew or shrank', () => {
    const recorded = outlineOf(request(300));
    assert.deepEqual(firstDifference(recorded, request(300, 297))?.path, ['params', 'messages', 297]);
    const grown = firstDifference(recorded, request(301))!;
    assert.deepEqual([grown.path, grown.counts], [['params', 'messages', 300], { recorded: 300, now: 301 }]);
    assert.equal(describeDifference(grown), 'request.params.messages[300] differs (300 recorded, 301 now); now: {"role":"user","text":"message 300"}');
    const shrunk = firstDifference(recorded, request(299))!;
    assert.deepEqual([shrunk.path, shrunk.now, shrunk.counts], [['params', 'messages', 299], undefined, { recorded: 300, now: 299 }]);
  });

  it('an earlier message is located to its block, named by range', () => {
    const recorded = outlineOf(request(300));
    const early = firstDifference(recorded, request(300, 40))!;
    assert.ok(early.range && early.range[0] <= 40 && 40 <= early.range[1], JSON.stringify(early.range));
    assert.equal(early.path.at(-1), early.range[0]);
    assert.match(describeDifference(early), /^one of request\.params\.messages\[\d+\]\.\.\[\d+\] differs; now request\.params\.messages\[\d+\]: /);
  });

  it('stored bytes grow with the log of the conversation, not its length', () => {
    const bytes = (n: number) => serialize(outlineOf(request(n))).length;
    const entries = (n: number) => (outlineOf(request(n)) as { params: { messages: string[] } }).params.messages.length;
    assert.equal(entries(TAIL), TAIL);
    assert.ok(entries(1000) <= TAIL + Math.ceil(Math.log2(1000)), String(entries(1000)));
    assert.ok(bytes(1000) < 3 * bytes(20), `${bytes(1000)} bytes for 1,000 messages, ${bytes(20)} for 20`);
  });
});
