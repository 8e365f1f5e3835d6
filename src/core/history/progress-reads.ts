import type { CheckpointStore } from '../../contract/checkpoint-store';
import type { RunRecord } from '../../contract/records';
import type { PipelinePlan } from '../plan/plan-types';
import { isFlowRun } from './flow-scopes';
import type { Integrity } from './row-integrity';
import { loadResumable } from './resume-base';
import { hasForEach, itemsCountable, runProgress, straightLineProgress, type RunProgress } from './run-progress';

/*
 * The store reads behind `runProgress` (core/history/run-progress.ts, the one definition of a run's progress):
 * what every view (run info, runs list, the page's list, `runs resume`) and a run's result read to count it.
 */

/**
 * Reads what `runProgress` needs from a store: the run's rows, and its child runs when the rows show a
 * control-flow run (a straight line costs no second query).
 *
 * With the run's plan and the reader's `integrity` (the Waypoint's HMAC key; an encrypted Waypoint's store
 * decrypts), a tree run is counted from its resume snapshot and the rows after it when one fits
 * (`loadResumable`): a 20,000-iteration loop's run info, runs list row, page list row or resume result reads
 * about `RESUME_BASE_EVERY` rows, not 40,000. The snapshot counts as the base row it is (its folded steps, loop
 * iterations and, for a pipeline with a `forEach`, the items of the item lists it folded). Without a plan or
 * `integrity`, with no snapshot that fits, or for a pipeline with a `forEach` whose snapshot does not carry its
 * items (one written before snapshots did), every row is read, as before.
 *
 * @example
 * const progress = await loadRunProgress(store, run, plan, {}); // { recorded: 20_000, planned: 20_001 }
 */
export async function loadRunProgress(store: CheckpointStore, run: RunRecord, plan?: PipelinePlan, integrity?: Integrity): Promise<RunProgress> {
  // A straight line's cursor is its position in the plan's steps: no rows to read (a runs list of long
  // runs would otherwise read every row of every listed run).
  if (plan?.linear) return straightLineProgress(run, plan);
  // loadResumable reads every row itself when no snapshot fits: one read either way.
  let loaded = plan && integrity ? await loadResumable(store, run.runId, integrity) : await store.loadRun(run.runId);
  if (plan && loaded && 'fromSnapshot' in loaded && loaded.fromSnapshot) {
    if (!hasForEach(plan.flow)) return runProgress(loaded.run, loaded.steps, plan);
    if (itemsCountable(loaded.steps)) {
      // Items over a @Pipeline are child runs: the tail's are counted from them, as from every row.
      const children = hasForEach(plan.flow, true) ? await store.listRuns({ parentRunId: run.runId }) : [];
      return runProgress(loaded.run, loaded.steps, plan, children);
    }
    // A snapshot written before snapshots carried their items: the items it folded are only in every row.
    loaded = await store.loadRun(run.runId);
  }
  const steps = loaded?.steps ?? [];
  const children = isFlowRun(steps, [], plan) ? await store.listRuns({ parentRunId: run.runId }) : [];
  return runProgress(loaded?.run ?? run, steps, plan, children);
}

/** Runs whose rows `loadRunsProgress` reads at once: a long list does not take every pooled connection. */
const PROGRESS_READS = 8;

/**
 * `loadRunProgress` for many runs (a list), in their order, a few at a time; with `integrity`, each tree run
 * with a fitting resume snapshot is counted from it.
 *
 * @example
 * const progress = await loadRunsProgress(store, runs, (run) => plans.get(run.pipelineName), {});
 */
export async function loadRunsProgress(
  store: CheckpointStore,
  runs: readonly RunRecord[],
  planOf: (run: RunRecord) => PipelinePlan | undefined,
  integrity?: Integrity,
): Promise<RunProgress[]> {
  const out: RunProgress[] = [];
  for (let i = 0; i < runs.length; i += PROGRESS_READS) {
    out.push(...(await Promise.all(runs.slice(i, i + PROGRESS_READS).map((run) => loadRunProgress(store, run, planOf(run), integrity)))));
  }
  return out;
}
