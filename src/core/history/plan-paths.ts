import type { StepRecord } from '../../contract/checkpoint-store';
import { PlanMismatchError } from '../../contract/errors';
import type { PipelinePlan } from '../plan/plan-types';
import { compressPaths, runsOf, type PathRun, type PathSet } from './path-runs';
import { rowPath, SYSTEM_AGENT } from './row-integrity';

/**
 * What a plan says about recorded step paths, for a restore: which paths a step of the plan can have, and
 * whether the top-level steps done are the plan's, in order. Both are worked out once per plan (plans are
 * cached per pipeline class) so that a resume's checks cost what the rows it read cost, not what the run
 * or the plan holds: a 20,000-step line restored from its snapshot checks a few hundred runs of paths.
 */

/** True for a step path at the pipeline's top level (not inside a branch, an item or an iteration). */
export function isTopLevel(path: string): boolean {
  return !path.includes('[');
}

interface PlanPaths {
  /**
   * Each step key as a pattern (each `[*]` an index), by the key's shape (every `[...]` written `[]`): a path
   * can match only the keys of its own shape, so a lookup tests a few patterns, not one per plan step.
   */
  byShape: Map<string, RegExp[]>;
  /** The plan's top-level step keys, in order, and the same in runs (with the position each starts at). */
  topLevel: string[];
  runs: Array<{ at: number; entry: string | PathRun }>;
}

const cache = new WeakMap<PipelinePlan, PlanPaths>();

function pathsOf(plan: PipelinePlan): PlanPaths {
  let paths = cache.get(plan);
  if (!paths) {
    const byShape = new Map<string, RegExp[]>();
    for (const step of plan.steps) {
      const pattern = new RegExp(`^${step.key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/\\\[\\\*\\\]/g, '\\[\\d+\\]')}$`);
      const list = byShape.get(shapeOf(step.key)) ?? [];
      list.push(pattern);
      byShape.set(shapeOf(step.key), list);
    }
    const topLevel = plan.steps.map((step) => step.key).filter(isTopLevel);
    const runs: PlanPaths['runs'] = [];
    let at = 0;
    for (const entry of compressPaths(topLevel)) {
      runs.push({ at, entry });
      at += typeof entry === 'string' ? 1 : entry[2] - entry[1] + 1;
    }
    paths = { byShape, topLevel, runs };
    cache.set(plan, paths);
  }
  return paths;
}

/** A key's or a path's shape: every bracketed part written `[]` (`loop[*]/A/s` and `loop[3]/A/s` are both `loop[]/A/s`). */
function shapeOf(path: string): string {
  return path.replace(/\[[^\]]*\]/g, '[]');
}

/**
 * True when `path` is a path a step of the plan can have: a step key with each `[*]` an index. Only the
 * keys of the path's shape are tried (a plan-wide pattern of 20,000 alternatives cost a 20,000-step line's
 * resume most of its time, once per tail row).
 */
export function isPlanPath(plan: PipelinePlan, path: string): boolean {
  return (
    pathsOf(plan)
      .byShape.get(shapeOf(path))
      ?.some((pattern) => pattern.test(path)) ?? false
  );
}

/**
 * Under the version they were recorded with, the top-level steps done (folded or with a row, in row order)
 * must be the pipeline's top-level steps from its first, in order: a step inserted, removed or moved under
 * the same version would otherwise be skipped or run out of order. Runs of folded paths are matched against
 * the plan's own runs a stretch at a time.
 */
export function checkTopLevelOrder(plan: PipelinePlan, runId: string, folded: PathSet, rows: readonly StepRecord[]): void {
  const paths = pathsOf(plan);
  let position = 0;
  const one = (key: string) => {
    if (paths.topLevel[position] !== key) throw outOfOrder(plan, runId, position, key, paths.topLevel[position]);
    position += 1;
  };
  for (const entry of folded.compact() ?? [...folded]) {
    for (const run of runsOf(entry)) {
      if (typeof run === 'string') {
        if (isTopLevel(run)) one(run);
      } else if (isTopLevel(run[0]) && isTopLevel(run[3])) {
        position = matchRun(paths, run, position, (key, at) => outOfOrder(plan, runId, at, key, paths.topLevel[at]));
      }
    }
  }
  for (const row of rows) {
    if (row.agentId === SYSTEM_AGENT) continue;
    const key = rowPath(row);
    if (isTopLevel(key)) one(key);
  }
}

/** Matches the paths of `run` against the plan's top-level keys from `position`; returns the position after them. */
function matchRun(paths: PlanPaths, run: PathRun, position: number, fail: (key: string, at: number) => Error): number {
  const [prefix, , to, suffix] = run;
  let at = position;
  for (let n = run[1]; n <= to;) {
    const span = spanAt(paths, at, run, n);
    if (span === 0) throw fail(`${prefix}${n}${suffix}`, at);
    n += span;
    at += span;
  }
  return at;
}

/** How many paths of `run` from number `n` on equal the plan's top-level keys from `at` on (0 when the first does not). */
function spanAt(paths: PlanPaths, at: number, run: PathRun, n: number): number {
  const [prefix, , to, suffix] = run;
  const planned = runAt(paths, at);
  if (planned && typeof planned.entry !== 'string') {
    const [p, from, last, s] = planned.entry;
    const number = from + (at - planned.at);
    if (p === prefix && s === suffix && number === n) return Math.min(to - n, last - number) + 1;
  }
  return paths.topLevel[at] === `${prefix}${n}${suffix}` ? 1 : 0;
}

/** The plan's run that holds top-level position `at` (binary search over their starts). */
function runAt(paths: PlanPaths, at: number): PlanPaths['runs'][number] | undefined {
  const runs = paths.runs;
  let lo = 0;
  let hi = runs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (runs[mid].at <= at) lo = mid + 1;
    else hi = mid - 1;
  }
  return hi >= 0 && at < paths.topLevel.length ? runs[hi] : undefined;
}

function outOfOrder(plan: PipelinePlan, runId: string, position: number, key: string, expected: string | undefined): PlanMismatchError {
  return new PlanMismatchError(
    runId,
    `the recorded step at position ${position + 1} is '${key}', but the pipeline's step there is '${expected ?? '(none)'}' under the same version ${plan.version}. ` +
      'Bump the pipeline version and register a migration, or restore the previous code.',
  );
}
