import type { Integrity } from '../core/history/row-integrity';
import { isRuntimeOperation } from '../core/history/resume-base';
import type { PipelinePlan } from '../core/plan/plan-reader';
import { listShownRuns } from '../core/flow/fan-out';
import type { CheckpointStore, LoadedRun, OperationRecord, RunRecord } from '../contract/checkpoint-store';
import { HttpError } from './errors';
import { isActive, parseRunsQuery } from './http-io';
import { allStepViews, planFor, runDetail, runSummary, type RunDetailView } from './run-views';
import { stepsBefore, WHOLE_RUN, type WindowQuery } from './steps-window';
import { checkpointView, flowStateAt, type CheckpointView } from './time-travel';
import { isFlowRun } from '../core/history/flow-scopes';
import { rowsNeedThePipeline } from '../core/history/flow-base';
import { joinsOf } from '../core/flow/join-rows';
import { loadRunsProgress } from '../core/history/progress-reads';
import type { ChildRunsView, RunListView, RunSummaryView, StepsPageView } from './api-types';

export type { ChildRunsView, RunListView } from './api-types';

/** Child runs read for one parent: a forEach over that many items is shown from its counts beyond it. */
const MAX_CHILDREN = 10_000;

export interface ReadApiOptions {
  plans: ReadonlyMap<string, PipelinePlan>;
  integrity: Integrity;
  minGapMs?: number;
  actionsAllowed: boolean;
  now?: () => Date;
}

/**
 * The read side of the UI: store records turned into the views the page draws. Reads only; every
 * method takes validated input and throws `RunNotFoundError` / `HttpError` for the server to map.
 *
 * @example
 * const api = new ReadApi(store, { plans: new Map(), integrity: {}, actionsAllowed: false });
 * const { runs } = await api.listRuns(new URLSearchParams('status=failed'));
 */
export class ReadApi {
  private readonly now: () => Date;

  constructor(
    private readonly store: CheckpointStore,
    private readonly options: ReadApiOptions,
  ) {
    this.now = options.now ?? (() => new Date());
  }

  async listRuns(params: URLSearchParams): Promise<RunListView> {
    const filter = parseRunsQuery(params);
    // Items of distributed forEach bodies show under their parent's detail, not in the list.
    const runs = await listShownRuns(this.store, filter);
    const now = this.now();
    return {
      runs: await this.summaries(runs, now),
      active: runs.some((run) => isActive(run.status)),
      limit: filter.limit,
      pipelines: [...this.options.plans.keys()].sort(),
    };
  }

  /** The run page's data; `window` keeps a long run's answer to a first screen (the page asks for 500 steps). */
  async runDetail(runId: string, window: WindowQuery = WHOLE_RUN): Promise<RunDetailView> {
    const [loaded, operations] = await Promise.all([this.load(runId), this.operations(runId)]);
    const plan = planFor(loaded.run, this.options.plans);
    // Only a control-flow run (a forEach over a @Pipeline) has child runs: a straight line costs no query.
    const children = isFlowRun(loaded.steps, [], plan) ? (await this.store.listRuns({ parentRunId: runId, limit: MAX_CHILDREN })).filter((r) => r.parentRunId === runId) : [];
    return runDetail(loaded, operations, {
      plan,
      children,
      integrity: this.options.integrity,
      minGapMs: this.options.minGapMs,
      now: this.now(),
      actionsAllowed: this.options.actionsAllowed,
      window,
    });
  }

  /** `GET /api/runs/:id/steps?before=SEQ&limit=N`: older step views than the page holds. */
  async stepsPage(runId: string, before: number, limit: number): Promise<StepsPageView> {
    const [loaded, operations] = await Promise.all([this.load(runId), this.operations(runId)]);
    return stepsBefore(allStepViews(loaded, operations, this.options.minGapMs), before, limit);
  }

  /** Rows of the list, each with the progress its run page shows (from a tree run's resume snapshot and the rows after it when one fits, else its rows). */
  private async summaries(runs: readonly RunRecord[], now: Date): Promise<RunSummaryView[]> {
    const planOf = (run: RunRecord) => planFor(run, this.options.plans);
    const progress = await loadRunsProgress(this.store, runs, planOf, this.options.integrity);
    return runs.map((run, i) => runSummary(run, planOf(run), now, progress[i]));
  }

  /** `GET /api/runs/:id/children`: the child runs of a forEach over a @Pipeline, by item index. */
  async children(runId: string): Promise<ChildRunsView> {
    await this.load(runId);
    const runs = (await this.store.listRuns({ parentRunId: runId, limit: MAX_CHILDREN })).filter((r) => r.parentRunId === runId);
    const now = this.now();
    return {
      parentRunId: runId,
      runs: (await this.summaries(runs, now)).sort((a, b) => a.runId.localeCompare(b.runId, 'en', { numeric: true })),
    };
  }

  async checkpoint(runId: string, sequence: number): Promise<CheckpointView> {
    const loaded = await this.load(runId);
    const view = checkpointView(loaded, sequence, this.options.integrity);
    const plan = planFor(loaded.run, this.options.plans);
    if (!this.options.plans.has(loaded.run.pipelineName) && joinsOf(loaded.run.metadata) === null && rowsNeedThePipeline(loaded.steps)) {
      // A control-flow run of an earlier release: its rows alone would give a state it never had.
      throw new HttpError(
        409,
        'STATE_NEEDS_PIPELINE',
        `Run '${runId}' is a control-flow run recorded by an earlier release, whose rows do not hold what its constructs joined, so its state cannot be read from the rows alone. Start the UI with a Waypoint that registers pipeline '${loaded.run.pipelineName}'.`,
        { runId },
      );
    }
    const replayed = await flowStateAt(loaded, sequence, plan, this.store, this.options.integrity);
    return replayed ? { ...view, checkpoint: { ...view.checkpoint, shared_context: replayed } } : view;
  }

  /** The run's operations but the runtime's own records (a resume snapshot is not a side effect: the page does not show it). */
  private async operations(runId: string): Promise<OperationRecord[]> {
    return (await this.store.listOperations(runId)).filter((op) => !isRuntimeOperation(op));
  }

  private async load(runId: string): Promise<LoadedRun> {
    const loaded = await this.store.loadRun(runId);
    if (!loaded) {
      throw new HttpError(
        404,
        'RUN_NOT_FOUND',
        `Run '${runId}' is not in this checkpoint store (${this.store.backend}). Check the run id, or point the UI at the store that holds it.`,
        { runId },
      );
    }
    return loaded;
  }
}
