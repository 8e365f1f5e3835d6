import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { MERGE_DELTA, mergedValues, mergeRowValues } from '../../src/core/flow/join-rows';

/*
 * A merge row records a reducer value as what the step added to it when the merged value extends the value
 * before the step (a list keeping its items, an object keeping its entries); anything else whole. Rows of
 * the releases that wrote whole values read as before.
 */

describe('merge row values', () => {
  const before = { log: ['a', 'b'], seen: { x: 1 }, total: 3 };

  const copy = (value: object) => JSON.parse(JSON.stringify(value)) as Record<string, unknown>;

  it('a list that kept its items and an object that kept its entries are recorded as what was added', () => {
    const merged = { log: [...before.log, 'c', 'd'], seen: { ...before.seen, y: 2 }, total: 7 };
    const values = mergeRowValues(merged, before, { log: ['c'], seen: { y: 2 }, total: 4 });
    assert.deepEqual(values, { total: 7, [MERGE_DELTA]: { log: { from: 2, items: ['c', 'd'] }, seen: { set: { y: 2 } } } });
    assert.deepEqual(mergedValues(copy(values), copy(before), {}), merged);
  });

  it("items that are the step's own update (a concat reducer) are named, not stored twice", () => {
    const added = [{ text: 'c'.repeat(1000) }];
    const merged = { log: [...before.log, ...added] };
    const values = mergeRowValues(merged, before, { log: added });
    assert.deepEqual(values, { [MERGE_DELTA]: { log: { from: 2, update: true } } });
    assert.deepEqual(mergedValues(copy(values), copy(before), copy({ log: added })), merged);
    assert.throws(() => mergedValues(copy(values), copy(before), {}), /'log' adds its step's update, but the step's row holds nothing for it/);
  });

  it('a list whose kept items are other objects, a shorter list, an object that dropped an entry, and a first value are recorded whole', () => {
    const merged = { log: ['a', 'b2', 'c'], seen: { y: 2 } };
    assert.deepEqual(mergeRowValues(merged, before, {}), merged);
    assert.deepEqual(mergeRowValues({ log: ['a'] }, before, {}), { log: ['a'] });
    assert.deepEqual(mergeRowValues({ log: ['a'] }, {}, {}), { log: ['a'] });
    const reordered = [{ n: 1 }, { n: 2 }];
    assert.deepEqual(mergeRowValues({ log: [{ n: 1 }, { n: 2 }, { n: 3 }] }, { log: reordered }, {}), { log: [{ n: 1 }, { n: 2 }, { n: 3 }] });
  });

  it('whole values (the rows earlier builds wrote) read as they are', () => {
    assert.deepEqual(mergedValues({ log: ['a', 'b', 'c'], total: 7 }, before, {}), { log: ['a', 'b', 'c'], total: 7 });
  });

  it('a delta that does not fit the state before its step is refused, naming the property', () => {
    assert.throws(
      () => mergedValues({ [MERGE_DELTA]: { log: { from: 5, items: ['c'] } } }, before, {}),
      /'log' extends a list of 5 items, but the state before its step holds a list of 2/,
    );
    assert.throws(
      () => mergedValues({ [MERGE_DELTA]: { seen: { set: { y: 2 } } } }, { seen: 4 }, {}),
      /'seen' adds entries to an object, but the state before its step holds number/,
    );
  });

  it('a state property named like the delta key keeps whole values', () => {
    const merged = { [MERGE_DELTA]: ['x', 'y'], log: [...before.log, 'c'] };
    assert.deepEqual(mergeRowValues(merged, { ...before, [MERGE_DELTA]: ['x'] }, {}), merged);
    assert.deepEqual(mergedValues(merged, before, {}), merged);
  });
});
