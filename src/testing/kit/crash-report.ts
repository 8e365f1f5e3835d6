import { isDeepStrictEqual } from 'node:util';
import type { CrashPoint, EffectRuns, Trace } from './crash-trace';
import { totalRuns } from './crash-trace';

/** What went wrong at one crash point. */
export interface CrashProblem {
  /** The crash point (see {@link CrashPoint.id}). */
  readonly point: string;
  /** The step the point is in (or, for an effect repeated elsewhere, the step of that effect). */
  readonly step: string;
  readonly kind: 'state-differs' | 'effect-repeated' | 'call-repeated' | 'observed-differs' | 'not-resumed';
  /** What happened, naming the step and the point, and what to change. */
  readonly message: string;
}

/** Executions seen of one side effect (by step and operation name) in each run of the test. */
export interface EffectExecutions {
  readonly step: string;
  readonly operation: string;
  /** Times its body ran in the reference run. */
  readonly reference: number;
  /** Times its body ran over each crashed-and-resumed run, by point id (points where it never ran are left out). */
  readonly byPoint: Readonly<Record<string, number>>;
  /** The most times its body ran for one operation key in any single run. */
  readonly maxPerKey: number;
}

/** One crash point the test crashed at. */
export interface PointOutcome extends CrashPoint {
  /** False when the crashed execution never reached the point (the pipeline took another path): nothing was checked. */
  readonly reached: boolean;
  readonly ok: boolean;
}

/** What `crashTest` found. */
export interface CrashReport {
  /** True when no crash point showed a problem. */
  readonly ok: boolean;
  readonly problems: readonly CrashProblem[];
  /** The crash points tested, in the order the reference run passed them. */
  readonly points: readonly PointOutcome[];
  /** Every crash point of the pipeline the reference run passed (`points` is a sample of it when `points` was a number). */
  readonly available: number;
  /** Per side effect, the executions seen. */
  readonly effects: readonly EffectExecutions[];
  /** The reference run's final status, state and observed changes. */
  readonly reference: { readonly status: string; readonly state: unknown; readonly observed: Readonly<Record<string, number>> };
  /** A multi-line summary of the problems, for an assertion message. */
  readonly summary: string;
}

/** What one scenario ended with. */
export interface ScenarioEnd {
  status: string;
  state: unknown;
  observed: Record<string, number>;
  trace: Trace;
}

/** The problems of the scenario that crashed at `point`, compared with the reference; `unrecorded`: effect keys whose body had started and whose outcome was not recorded when the process died. */
export function compare(
  point: CrashPoint,
  crashed: ScenarioEnd,
  reference: ScenarioEnd,
  { observing, repeatable }: { observing: boolean; repeatable: readonly string[] },
  unrecorded: ReadonlySet<string>,
): CrashProblem[] {
  const problems: CrashProblem[] = [];
  const at = `a crash at '${point.id}' (step '${point.step}')`;
  let observedDiffers = false;
  for (const [name, change] of Object.entries(crashed.observed)) {
    const expected = reference.observed[name];
    if (change === expected) continue;
    observedDiffers = true;
    problems.push({
      point: point.id,
      step: point.step,
      kind: 'observed-differs',
      message:
        `After ${at} and a resume, observed '${name}' changed by ${change}, but by ${expected} over the run without a crash: ` +
        `something in or after step '${point.step}' wrote outside the side-effect guard (a write in a plain @Step, a tool outside durableTools, ` +
        'an idempotency key that is not stable) or the external system did not deduplicate by currentOperation().key. Move the write into a @SideEffect and pass it that key.',
    });
  }
  if (crashed.status !== reference.status || !isDeepStrictEqual(crashed.state, reference.state)) {
    problems.push({
      point: point.id,
      step: point.step,
      kind: 'state-differs',
      message:
        `After ${at} and a resume, the run ended ${crashed.status} with a state that differs from the run without a crash (${reference.status})` +
        `${describeDifference(crashed.state, reference.state)}: a step's output depends on something that is not recorded (the clock, a random id, process memory); compute it inside a @SideEffect or durable() call so the resume reuses it.`,
    });
  }
  const steps = new Set([...crashed.trace.effects.values()].map((runs) => runs.step));
  const mayRepeat = (operation: string) => repeatable.some((name) => (name.endsWith('*') ? operation.startsWith(name.slice(0, -1)) : operation === name));
  for (const step of steps) problems.push(...repeatedIn(step, { point, at, crashed, reference, harmless: observing && !observedDiffers, mayRepeat, unrecorded }));
  return problems;
}

interface RepeatCheck {
  point: CrashPoint;
  at: string;
  crashed: ScenarioEnd;
  reference: ScenarioEnd;
  /** Every observed value moved as over the reference: an effect run again in the gap was deduplicated downstream. */
  harmless: boolean;
  /** The caller declared this operation repeatable in the gap (`repeatable`). */
  mayRepeat: (operation: string) => boolean;
  unrecorded: ReadonlySet<string>;
}

/** The effects of `step` that ran more often than over the reference: per key (run again), and in all (a key that changed). */
function repeatedIn(step: string, check: RepeatCheck): CrashProblem[] {
  const { point, at, unrecorded } = check;
  const counted = (trace: Trace) => [...trace.effects.values()].filter((runs) => runs.step === step && !runs.transactional && !runs.operation.startsWith('waypoint:'));
  const mine = counted(check.crashed.trace);
  const problems: CrashProblem[] = [];
  let allowed = 0;
  for (const runs of mine) {
    const what = runs.call ? `recorded call '${runs.operation}'` : `side effect '${runs.operation}'`;
    const kind = runs.call ? 'call-repeated' : 'effect-repeated';
    for (const [key, count] of runs.perKey) {
      if (count <= 1) continue;
      // The documented gap: the body ran, the process died before its outcome was recorded, so it runs again with the same key.
      const inGap = unrecorded.has(key);
      if (inGap) allowed += count - 1;
      if (inGap && count === 2 && (check.harmless || check.mayRepeat(runs.operation))) continue;
      problems.push({
        point: point.id,
        step,
        kind,
        message: inGap
          ? `After ${at}, ${what} of step '${step}' ran ${count} times for one key: the process died after its body ran and before its outcome was recorded, so it ran again with the same key. ` +
            'Pass currentOperation().key to the external system and observe what it did (observe: { ... }) to prove it deduplicates, give the effect a reconcile hook, or make it transactional.'
          : `After ${at}, ${what} of step '${step}' ran ${count} times for one key although its outcome was recorded: report this with the pipeline, it should not happen.`,
      });
    }
  }
  if (problems.length > 0) return problems;
  const ran = mine.reduce((n, runs) => n + totalRuns(runs), 0);
  const before = counted(check.reference.trace).reduce((n, runs) => n + totalRuns(runs), 0);
  if (ran - allowed <= before) return [];
  const known = new Set(counted(check.reference.trace).map((runs) => runs.operation));
  const fresh = mine.filter((runs) => !known.has(runs.operation)).map((runs) => `'${runs.operation}'`);
  const call = mine.some((runs) => runs.call);
  return [
    {
      point: point.id,
      step,
      kind: call ? 'call-repeated' : 'effect-repeated',
      message:
        `After ${at} and a resume, the side effects of step '${step}' ran ${ran} times, but ${before} times without a crash: a key changed between executions` +
        `${fresh.length > 0 ? ` (${fresh.join(', ')} has no counterpart in the run without a crash)` : ''}, built from Date.now(), a random id or a counter in process memory, so the resume made the ${call ? 'call' : 'effect'} again. ` +
        'Derive the key from the run and the item (the default @SideEffect key, or currentOperation().key).',
    },
  ];
}

/** ` (first difference at 'path': a vs b)`, or '' when the states are equal. */
function describeDifference(a: unknown, b: unknown, path = ''): string {
  if (isDeepStrictEqual(a, b)) return '';
  if (a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const key of keys) {
      const inner = describeDifference((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key], path ? `${path}.${key}` : key);
      if (inner) return inner;
    }
  }
  return ` (first difference at '${path || '(state)'}': ${short(a)} instead of ${short(b)})`;
}

function short(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** Per effect, the executions seen over the reference and every crashed run. */
export function effectExecutions(reference: Trace, crashed: ReadonlyMap<string, Trace>): EffectExecutions[] {
  const byEffect = new Map<string, { step: string; operation: string; reference: number; byPoint: Record<string, number>; maxPerKey: number }>();
  const entry = (runs: EffectRuns) => {
    const id = `${runs.step} ${runs.operation}`;
    let e = byEffect.get(id);
    if (!e) byEffect.set(id, (e = { step: runs.step, operation: runs.operation, reference: 0, byPoint: {}, maxPerKey: 0 }));
    e.maxPerKey = Math.max(e.maxPerKey, ...runs.perKey.values());
    return e;
  };
  for (const runs of reference.effects.values()) entry(runs).reference = totalRuns(runs);
  for (const [point, trace] of crashed) for (const runs of trace.effects.values()) entry(runs).byPoint[point] = totalRuns(runs);
  return [...byEffect.values()].filter((e) => !e.operation.startsWith('waypoint:'));
}
