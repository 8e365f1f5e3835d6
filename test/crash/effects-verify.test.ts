import { strict as assert } from 'node:assert';
import { describe, it } from 'node:test';
import { EFFECTS, effectKey, type JournalLine } from './effects-pipeline';
import { classifyExternal } from './effects-verify';
import { namedCases, randomKills } from './effects-harness';
import { seedFor, seeded } from './prng';

// The harness's judgement must fail on what it is there to catch; these cases feed it deliveries as the
// API and the journal would record them.

const runId = 'verify-unit';
const keyOf = (kind: string, nth = 0) => effectKey(runId, EFFECTS.filter((e) => e.kind === kind)[nth]);
/** One delivery of every external effect, from process 1. */
function clean(): { key: string; pid: number; path: string }[] {
  return EFFECTS.filter((e) => e.kind !== 'transactional').map((e) => ({ key: effectKey(runId, e), pid: 1, path: '/x' }));
}
const returned = (key: string, pid: number): JournalLine => ({ event: 'returned', key, pid });

describe('crash harness: judging external deliveries', () => {
  it('one delivery per key, no kill: no repeats, no violations', () => {
    assert.deepEqual(classifyExternal(runId, clean(), [], new Set()), { repeats: { betweenEffectAndRecord: 0, other: 0 }, violations: [] });
  });

  it('a repeat after a process killed before its record is the allowed kind', () => {
    const key = keyOf('external');
    const result = classifyExternal(runId, [{ key, pid: 7, path: '/notify' }, ...clean()], [], new Set([7]));
    assert.deepEqual(result, { repeats: { betweenEffectAndRecord: 1, other: 0 }, violations: [] });
  });

  it('a repeat after the effect was recorded is a violation, killed or not', () => {
    const key = keyOf('external');
    const result = classifyExternal(runId, [{ key, pid: 7, path: '/notify' }, ...clean()], [returned(key, 7)], new Set([7]));
    assert.equal(result.repeats.other, 1);
    assert.match(result.violations.join('\n'), /repeated after process 7 \(killed, recorded it\)/);
  });

  it('a repeat after a process that was not killed is a violation', () => {
    const key = keyOf('external', 1);
    const result = classifyExternal(runId, [{ key, pid: 8, path: '/notify' }, ...clean()], [], new Set());
    assert.match(result.violations.join('\n'), /repeated after process 8 \(not killed/);
  });

  it('the reconciled effect is never repeated, even after a kill before its record', () => {
    const key = keyOf('reconciled');
    const result = classifyExternal(runId, [{ key, pid: 9, path: '/charges' }, ...clean()], [], new Set([9]));
    assert.match(result.violations.join('\n'), /reconciled effect .* repeated/);
  });

  it('a missing delivery, a foreign key, a request without a key, two sends from one process: violations', () => {
    const [first, ...rest] = clean();
    const result = classifyExternal(runId, [...rest, { key: 'not-a-planned-key', pid: 1, path: '/notify' }, { key: null, pid: 1, path: '/notify' }, rest[0]], [], new Set([1]));
    const text = result.violations.join('\n');
    assert.match(text, new RegExp(`external effect ${first.key.slice(0, 12)} never received`));
    assert.match(text, /unexpected key not-a-planned-key/);
    assert.match(text, /unexpected key null/);
    assert.match(text, /sent twice by one process/);
  });
});

describe('crash harness: plans', () => {
  it('named cases: every fault point; external repeats expected only between an external call and its record', () => {
    const all = namedCases('all');
    assert.equal(all.length, 2 * EFFECTS.length + 2 * 6);
    const repeating = all.filter((c) => c.externalRepeats > 0).map((c) => c.spec);
    assert.deepEqual(
      repeating,
      EFFECTS.flatMap((e, i) => (e.kind === 'external' ? [`after-effect-before-record@${i + 1}`] : [])),
    );
    for (const point of ['before-effect', 'after-effect-before-record', 'after-record-before-checkpoint', 'after-checkpoint-before-next-step']) {
      assert.ok(
        namedCases('representative').some((c) => c.spec.startsWith(`${point}@`)),
        `${point} is in the npm test set`,
      );
    }
  });

  it('random kills are reproducible from the seed and stay within their bounds', () => {
    const bounds = { ticks: 80, durationMs: 200, maxKills: 3 };
    const a = randomKills(seeded(seedFor(7, 42)), bounds);
    assert.deepEqual(randomKills(seeded(seedFor(7, 42)), bounds), a);
    assert.notDeepEqual(randomKills(seeded(seedFor(8, 42)), bounds), a);
    for (let i = 0; i < 200; i++) {
      for (const kill of randomKills(seeded(seedFor(1, i)), bounds)) {
        if (kill.kind === 'tick') assert.ok(kill.tick >= 1 && kill.tick <= 80);
        if (kill.kind === 'time') assert.ok(kill.afterMs >= 0 && kill.afterMs < 200);
        if (kill.kind === 'fault') assert.match(kill.spec, /^[a-z-]+@[1-9]$/);
      }
    }
  });
});
