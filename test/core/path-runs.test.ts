import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { compressPaths, expandPaths } from '../../src/core/history/path-runs';

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
});
