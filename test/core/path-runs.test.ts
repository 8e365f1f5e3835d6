import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { appendPaths, compactPaths, compressPaths, compressRuns, expandPaths } from '../../src/core/history/path-runs';

describe('path runs (a resume snapshot keeps its completed steps in runs)', () => {
  it('a 20,000-step line and a 20,000-iteration loop are one entry each, and expand back in order', () => {
    const line = Array.from({ length: 20_000 }, (_, i) => `Big.s${i}`);
    const loop = Array.from({ length: 20_000 }, (_, i) => `loop#2[${i}]/Tick.tick`);
    assert.deepEqual(compressPaths(line), [['Big.s', 0, 19_999, '']]);
    assert.deepEqual(compressPaths(loop), [['loop#2[', 0, 19_999, ']/Tick.tick']]);
    assert.deepEqual(expandPaths(compressPaths([...line, ...loop])), [...line, ...loop]);
  });

  it('keeps paths that do not count up as they are, in their order (leading zeros, gaps, two numbers changing)', () => {
    const paths = ['A.s2', 'A.s1', 'B.x', 'C.s09', 'C.s10', 'D.s1', 'D.s3', 'p[0]/q[0]/E.e', 'p[1]/q[1]/E.e', 'F.s7', 'F.s8', 'F.s9'];
    const compressed = compressPaths(paths);
    assert.deepEqual(expandPaths(compressed), paths);
    assert.deepEqual(compressed.slice(-1), [['F.s', 7, 9, '']]);
    assert.ok(compressed.includes('C.s09'), 'a number with a leading zero is not part of a run');
  });

  it('keeps a line of agents, each holding a stretch of numbered steps, as one grid of runs, and expands it back in order', () => {
    const global = Array.from({ length: 20_000 }, (_, i) => `Agent${Math.floor(i / 50)}/s${i}`);
    const local = Array.from({ length: 1_000 }, (_, i) => `Agent${Math.floor(i / 10)}/s${i % 10}`);
    assert.deepEqual(compactPaths(global), [['Agent', 0, 399, '/s', 0, 50, 50, '']]);
    assert.deepEqual(compactPaths(local), [['Agent', 0, 99, '/s', 0, 0, 10, '']]);
    assert.deepEqual(expandPaths(compactPaths([...global, 'B.x', ...local])), [...global, 'B.x', ...local]);
  });

  it('makes no grid of two runs, of runs of unequal length or stride, or across a gap in the prefix number', () => {
    const two = compressPaths(['A0.s0', 'A0.s1', 'A1.s2', 'A1.s3']);
    assert.deepEqual(compressRuns(two), two);
    const paths = ['A0.s0', 'A0.s1', 'A1.s2', 'A1.s3', 'A2.s4', 'A2.s5', 'A2.s6', 'A3.s7', 'A3.s8', 'A5.s9', 'A5.s10', 'A6.s20', 'A6.s21'];
    const compact = compactPaths(paths);
    assert.deepEqual(expandPaths(compact), paths);
    assert.deepEqual(compact, compressPaths(paths), 'no three runs in a row share a shape');
    // Stride changes after the third run: the grid ends there and the rest stays runs.
    const strides = ['A0.s0', 'A0.s1', 'A1.s2', 'A1.s3', 'A2.s4', 'A2.s5', 'A3.s9', 'A3.s10'];
    assert.deepEqual(compactPaths(strides), [
      ['A', 0, 2, '.s', 0, 2, 2, ''],
      ['A3.s', 9, 10, ''],
    ]);
    assert.deepEqual(expandPaths(compactPaths(strides)), strides);
  });

  it('appends paths to compact entries without expanding them: the same paths as the whole list, as compact', () => {
    const line = Array.from({ length: 2_000 }, (_, i) => `Agent${Math.floor(i / 50)}/s${i}`);
    const loop = Array.from({ length: 300 }, (_, i) => `loop#1[${i}]/Tick.tick`);
    const odd = ['B.x', 'C.s09', 'C.s10', 'D.s1', 'D.s2'];
    const all = [...line, ...loop, ...odd];
    // Cut anywhere (inside an agent's run, between agents, inside the loop, among single paths): the same result.
    for (const cut of [1, 37, 50, 75, 1_000, 1_999, 2_000, 2_001, 2_150, 2_299, 2_300, 2_301, 2_303, all.length - 1]) {
      const appended = appendPaths(compactPaths(all.slice(0, cut)), all.slice(cut));
      assert.deepEqual(expandPaths(appended), all, `cut at ${cut}`);
      assert.deepEqual(appended, compactPaths(all), `cut at ${cut}: as compact as the whole list`);
    }
    // Snapshot after snapshot: each appends the steps since the last one.
    let entries = appendPaths([], []);
    for (let from = 0; from < all.length; from += 123) entries = appendPaths(entries, all.slice(from, from + 123));
    assert.deepEqual(entries, compactPaths(all));
  });

  it('leaves the entries it appends to as they were (they may be a stored payload)', () => {
    const entries = compactPaths(Array.from({ length: 150 }, (_, i) => `A${Math.floor(i / 50)}/s${i}`));
    const before = JSON.stringify(entries);
    const appended = appendPaths(
      entries,
      Array.from({ length: 60 }, (_, i) => `A${Math.floor((150 + i) / 50)}/s${150 + i}`),
    );
    assert.equal(JSON.stringify(entries), before);
    assert.deepEqual(appended, [
      ['A', 0, 3, '/s', 0, 50, 50, ''],
      ['A4/s', 200, 209, ''],
    ]);
  });
});
