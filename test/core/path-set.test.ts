import 'reflect-metadata';
import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { loop, readPlan, Pipeline, WaypointError } from '../../src/index';
import { compactPaths, compressPaths, expandPaths, PathSet } from '../../src/core/history/path-runs';
import { checkTopLevelOrder, isPlanPath } from '../../src/core/history/plan-paths';
import type { StepRecord } from '../../src/contract/checkpoint-store';
import { syntheticPipeline } from '../helpers/synthetic-pipeline';

/*
 * What a resume from a snapshot works with instead of every completed path (issue 40): the snapshot's runs as
 * a set (PathSet), and the plan's checks done a run at a time (plan-paths.ts). Each must answer exactly what
 * the expanded list answers.
 */

describe('PathSet: a snapshot’s completed steps, in runs, as a set', () => {
  it('answers has and size without expanding, exactly as the expanded list', () => {
    const paths = [...Array.from({ length: 20_000 }, (_, i) => `loop#2[${i}]/Tick.tick`), 'B.x', 'p[3]/q[0]/E.e', 'p[4]/q[0]/E.e'];
    const set = new PathSet(compressPaths(paths));
    assert.equal(set.size, paths.length);
    for (const path of ['loop#2[0]/Tick.tick', 'loop#2[12345]/Tick.tick', 'loop#2[19999]/Tick.tick', 'B.x', 'p[4]/q[0]/E.e']) assert.ok(set.has(path), path);
    for (const path of ['loop#2[20000]/Tick.tick', 'loop#2[012]/Tick.tick', 'loop#2[1]/Tick.tock', 'loop#3[1]/Tick.tick', 'p[5]/q[0]/E.e', 'B.y', ''])
      assert.ok(!set.has(path), path);
    assert.deepEqual([...set], paths);
  });

  it('answers has, size and counts for a grid of runs exactly as the expanded list', () => {
    const paths = [
      ...Array.from({ length: 2_000 }, (_, i) => `A${Math.floor(i / 50)}/s${i}`),
      'p[1]/B.x',
      ...Array.from({ length: 60 }, (_, i) => `f[${Math.floor(i / 3)}]/C.c${i % 3}`),
    ];
    const entries = compactPaths(paths);
    assert.equal(entries.length, 3, JSON.stringify(entries));
    const set = new PathSet(entries);
    assert.equal(set.size, paths.length);
    for (const path of ['A0/s0', 'A0/s49', 'A1/s50', 'A17/s899', 'A39/s1999', 'f[0]/C.c0', 'f[19]/C.c2']) assert.ok(set.has(path), path);
    for (const path of ['A0/s50', 'A1/s49', 'A40/s2000', 'A01/s50', 'A1/s050', 'A17/s900', 'f[20]/C.c0', 'f[3]/C.c3', 'B0/s0']) assert.ok(!set.has(path), path);
    assert.deepEqual([...set], paths);
    assert.equal(set.countStartingWith('f['), 60);
    assert.equal(set.countStartingWith('f[1'), expandPaths(entries).filter((path) => path.startsWith('f[1')).length);
    assert.equal(set.countStartingWith('A1'), expandPaths(entries).filter((path) => path.startsWith('A1')).length);
    set.delete('A3/s170');
    assert.equal(set.has('A3/s170'), false);
    assert.equal(set.size, paths.length - 1);
  });

  it('adds and removes single paths, keeping size and order (entries first, then the added ones)', () => {
    const set = new PathSet([['A.s', 0, 4, ''], 'B.x']);
    assert.equal(set.delete('A.s2'), true);
    assert.equal(set.delete('A.s2'), false);
    assert.equal(set.has('A.s2'), false);
    set.add('C.y').add('C.y').add('A.s2');
    assert.equal(set.size, 7);
    assert.deepEqual([...set], ['A.s0', 'A.s1', 'A.s2', 'A.s3', 'A.s4', 'B.x', 'C.y']);
    assert.equal(set.compact(), null, 'changed: its entries alone no longer say what it holds');
    assert.deepEqual(new PathSet([['A.s', 0, 4, '']]).compact(), [['A.s', 0, 4, '']]);
  });
});

describe('plan paths: the restore’s checks against the plan, a run at a time', () => {
  const line = readPlan(syntheticPipeline({ name: 'path_set_line', steps: 5000 }));
  const keys = line.steps.map((step) => step.key);
  const row = (key: string, sequence: number): StepRecord => {
    const [agentId, stepName] = key.split('/');
    return { agentId, stepName, sequence, path: null } as unknown as StepRecord;
  };

  it('accepts the top-level steps done in the plan’s order, as runs, as single paths, or split otherwise', () => {
    checkTopLevelOrder(line, 'r', new PathSet(compressPaths(keys.slice(0, 4000))), [row(keys[4000], 4001), row(keys[4001], 4002)]);
    checkTopLevelOrder(line, 'r', new PathSet(keys.slice(0, 120)), []);
    checkTopLevelOrder(line, 'r', new PathSet(['Agent0/s0', ['Agent0/s', 1, 10, ''], ['Agent0/s', 11, 49, ''], ['Agent1/s', 50, 60, '']]), []);
    // A snapshot's grid of runs (one per agent).
    assert.deepEqual(compactPaths(keys.slice(0, 4000)), [['Agent', 0, 79, '/s', 0, 50, 50, '']]);
    checkTopLevelOrder(line, 'r', new PathSet(compactPaths(keys.slice(0, 4000))), [row(keys[4000], 4001)]);
  });

  it('refuses a grid of runs whose steps are not the plan’s, as it refuses the same paths expanded', () => {
    const skipped = keys.slice(0, 4000).filter((key) => key !== 'Agent3/s150');
    const moved = keys.slice(0, 4000).map((key) => (key === 'Agent79/s3999' ? 'Agent79/s4000' : key));
    for (const paths of [keys.slice(50, 4000), moved]) {
      const grid = compactPaths(paths);
      assert.ok(
        grid.some((entry) => Array.isArray(entry) && entry.length === 8),
        JSON.stringify(grid.slice(0, 2)),
      );
      let expected: unknown;
      assert.throws(
        () => checkTopLevelOrder(line, 'r', new PathSet(expandPaths(grid)), []),
        (error: unknown) => ((expected = (error as Error).message), true),
      );
      assert.throws(
        () => checkTopLevelOrder(line, 'r', new PathSet(grid), []),
        (error: unknown) => error instanceof WaypointError && error.message === expected,
      );
    }
    assert.throws(() => checkTopLevelOrder(line, 'r', new PathSet(compactPaths(skipped)), []), /position 151 is 'Agent3\/s151'.*'Agent3\/s150'/);
  });

  it('refuses a run of folded steps that is not the plan’s at its position, naming the first step out of place', () => {
    const shifted = compressPaths(keys.slice(0, 4000)).map((entry) => (Array.isArray(entry) && entry[1] === 150 ? (['Agent3/s', 151, 200, ''] as typeof entry) : entry));
    assert.throws(
      () => checkTopLevelOrder(line, 'run-x', new PathSet(shifted), []),
      (error: unknown) =>
        error instanceof WaypointError && error.code === 'PLAN_MISMATCH' && /position 151 is 'Agent3\/s151'.*'Agent3\/s150'/.test(error.message) && error.message.includes('run-x'),
    );
    assert.throws(
      () =>
        checkTopLevelOrder(
          line,
          'r',
          new PathSet([
            ['Agent0/s', 0, 49, ''],
            ['Agent1/s', 50, 5000, ''],
          ]),
          [],
        ),
      /position 101 is 'Agent1\/s100'.*'Agent2\/s100'/,
    );
    assert.throws(() => checkTopLevelOrder(line, 'r', new PathSet([...compressPaths(keys), ['Agent99/s', 5000, 5001, '']]), []), /position 5001 is 'Agent99\/s5000'.*'\(none\)'/);
    assert.throws(() => checkTopLevelOrder(line, 'r', new PathSet(compressPaths(keys.slice(0, 100))), [row(keys[101], 101)]), /position 101 is 'Agent2\/s101'/);
    // The same checks on the expanded list (what a resume did before): the same verdicts.
    assert.throws(() => checkTopLevelOrder(line, 'r', new PathSet(expandPaths(shifted)), []), /position 151 is 'Agent3\/s151'/);
  });

  it('knows the paths a step of the plan can have, trying only the keys of the path’s shape', () => {
    @Pipeline({ name: 'path-set-loop', version: '1.0.0', agents: [loop({ until: () => true, maxIterations: 5 }, syntheticPipelineAgent())] })
    class Looping {}
    const plan = readPlan(Looping);
    const template = plan.steps[0].key;
    assert.ok(isPlanPath(plan, template.replace('[*]', '[12]')), template);
    assert.ok(!isPlanPath(plan, template.replace('[*]', '[x]')));
    assert.ok(!isPlanPath(plan, template), 'a literal [*] is not an index');
    assert.ok(isPlanPath(line, 'Agent3/s150'));
    assert.ok(!isPlanPath(line, 'Agent3/s5000'));
  });
});

/** The first agent class of a small synthetic pipeline (a body for a loop). */
function syntheticPipelineAgent() {
  const plan = readPlan(syntheticPipeline({ name: 'path_set_body', steps: 2 }));
  return plan.agents[0].type;
}
