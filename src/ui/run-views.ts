import { isJoinRow } from '../core/flow/join-rows';
import { firstInvalidStep, isHmacSealed, SYSTEM_AGENT, type Integrity } from '../core/history/row-integrity';
import type { PipelinePlan } from '../core/plan/plan-reader';
import {
  TERMINAL_STATUSES,
  type LoadedRun,
  type OperationRecord,
  type OperationState as StoreOperationState,
  type RunRecord,
  type RunStatus as StoreRunStatus,
  type StepRecord,
  type StepStatus as StoreStepStatus,
} from '../contract/checkpoint-store';
import { aiUsageByStep, type StepAiUsage as AiStepUsage } from '../integrations/ai/usage';
import { analyzeSessions, type ResumePoint } from '../core/history/sessions';
import { isFlowRun } from '../core/history/flow-scopes';
import { runProgress, type RunProgress } from '../core/history/run-progress';
import { flowView } from './flow-view';
import { flowStepsOf, WHOLE_RUN, windowOf, type WindowQuery } from './steps-window';
import type {
  AttemptView,
  ErrorView,
  FailedStepView,
  IntegrityView,
  OperationState,
  ProgressView,
  ResumePointView,
  RunDetailView,
  RunStatus,
  RunSummaryView,
  StepAiUsage,
  StepStatus,
  StepView,
} from './api-types';

export type {
  AttemptView,
  ErrorView,
  FailedStepView,
  IntegrityView,
  LeaseView,
  ProgressView,
  ResumePointView,
  RunDetailView,
  RunSummaryView,
  SideEffectView,
  StepView,
  SystemRowView,
} from './api-types';

/** True when A and B are the same type. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type AllTrue<T extends readonly true[]> = T;
// api-types.ts restates these store, core and AI types (it imports nothing, so that the page's build can read it):
// one changed on either side and not on the other fails the build here.
type _RestatedTypesMatch = AllTrue<
  [
    Same<RunStatus, StoreRunStatus>,
    Same<StepStatus, StoreStepStatus>,
    Same<OperationState, StoreOperationState>,
    Same<StepAiUsage, AiStepUsage>,
    Same<Omit<ResumePointView, 'idleFrom' | 'resumedAt'>, Omit<ResumePoint, 'idleFrom' | 'resumedAt'>>,
  ]
>;

/** Prefix of HMAC-sealed digests (src/core/history/checkpoint-manager.ts), to tell "no key" from "corrupted". */

/** The plan registered for this run's pipeline, if its version is the one the run records. */
export function planFor(run: RunRecord, plans: ReadonlyMap<string, PipelinePlan>): PipelinePlan | undefined {
  const plan = plans.get(run.pipelineName);
  return plan && plan.version === run.pipelineVersion ? plan : undefined;
}

/**
 * A run's progress as the page shows it: `runProgress` (core/history/run-progress.ts), the one definition the CLI and
 * `RunInfo` show too; `basis` says where `total` comes from.
 */
export function progressOf(progress: RunProgress, plan: PipelinePlan | undefined): ProgressView {
  const basis = plan === undefined ? 'recorded' : !plan.linear ? 'flow' : 'plan';
  return { done: progress.recorded, total: progress.planned, basis, ...(progress.items ? { items: progress.items } : {}) };
}

/** One row of the runs list. */
export function runSummary(run: RunRecord, plan: PipelinePlan | undefined, now: Date, progress: RunProgress): RunSummaryView {
  const live = run.leaseOwner !== null && !TERMINAL_STATUSES.has(run.status);
  return {
    runId: run.runId,
    pipeline: run.pipelineName,
    version: run.pipelineVersion,
    status: run.status,
    progress: progressOf(progress, plan),
    startedAt: run.createdAt.toISOString(),
    updatedAt: run.updatedAt.toISOString(),
    lease: live
      ? {
          owner: run.leaseOwner!,
          epoch: run.leaseEpoch,
          expiresAt: run.leaseExpiresAt?.toISOString() ?? null,
          expired: run.leaseExpiresAt !== null && run.leaseExpiresAt.getTime() < now.getTime(),
        }
      : null,
    resumeHint: run.resumeHint,
    error: run.error === null ? null : parseError(run.error),
  };
}

/** Integrity of the stored rows, checked the way a resume checks them. */
export function integrityOf(run: RunRecord, steps: readonly StepRecord[], integrity: Integrity): IntegrityView {
  if (steps.length === 0 && run.lastSequence === 0) return { status: 'empty', rows: 0, seal: null, sequence: null, message: null };
  const seal = steps.length > 0 && steps.every((s) => isHmacSealed(s.sha256)) ? 'hmac' : 'sha256';
  const bad = firstInvalidStep(run, steps, integrity);
  if (!bad) return { status: 'verified', rows: steps.length, seal, sequence: null, message: null };
  const row = steps[bad.index];
  if (row && !integrity.hmacKey && isHmacSealed(row.sha256)) {
    return {
      status: 'unverifiable',
      rows: steps.length,
      seal,
      sequence: row.sequence,
      message: 'Rows are sealed with an HMAC; start the UI with the same hmacKey to verify them.',
    };
  }
  return { status: 'corrupted', rows: steps.length, seal, sequence: bad.sequence, message: bad.error.message };
}

export interface DetailOptions {
  plan: PipelinePlan | undefined;
  integrity: Integrity;
  minGapMs?: number;
  now: Date;
  actionsAllowed: boolean;
  /** The run's child runs (`listRuns({ parentRunId })`), for a control-flow run. */
  children?: readonly RunRecord[];
  /** What of a long run to send (steps/side effects, loop iterations and forEach items); the whole run without. */
  window?: WindowQuery;
}

/** Every recorded step of a run as the page draws it (for `GET /api/runs/:id/steps`). */
export function allStepViews(loaded: LoadedRun, operations: readonly OperationRecord[], minGapMs?: number): StepView[] {
  const rows = loaded.steps.filter((s) => s.agentId !== SYSTEM_AGENT);
  return stepViewsOf(rows, operations, analyzeSessions(loaded.run, loaded.steps, operations, { minGapMs }));
}

/** The run page's data: run, timeline steps with their sessions, resume points, operations, integrity. */
export function runDetail(loaded: LoadedRun, operations: readonly OperationRecord[], options: DetailOptions): RunDetailView {
  const { run, steps } = loaded;
  const rows = steps.filter((s) => s.agentId !== SYSTEM_AGENT);
  const analysis = analyzeSessions(run, steps, operations, { minGapMs: options.minGapMs });
  const stepViews = stepViewsOf(rows, operations, analysis);
  // Attempts are keyed by a control-flow step's path.
  const recordedKeys = new Set(stepViews.flatMap((s) => [s.key, s.path]));
  const attempts = attemptViews(analysis);
  const failedSteps = failedStepsOf(
    attempts.filter((a) => !recordedKeys.has(a.stepKey)),
    options.plan,
  );
  const flow = isFlowRun(steps, options.children ?? [], options.plan);
  const summary = runSummary(run, options.plan, options.now, runProgress(run, steps, options.plan, options.children ?? []));
  const base = steps[0]?.agentId === SYSTEM_AGENT && steps[0].stepName === 'base' ? steps[0].sequence : 0;
  const query = options.window ?? WHOLE_RUN;
  const sent = windowOf(stepViews, sideEffectViews(operations), query);
  const tree = flow
    ? flowView(
        run,
        steps,
        options.plan,
        options.children ?? [],
        failedSteps.map((f) => f.key),
        query.steps,
      )
    : null;
  return {
    run: runOfDetail(run, summary),
    flow: tree,
    agents: agentsOf(options.plan, stepViews, failedSteps, sent.steps.length < stepViews.length ? new Set(sent.steps.map((v) => v.key)) : null),
    planKnown: options.plan !== undefined,
    steps: sent.steps,
    flowSteps: flowStepsOf(tree, stepViews, sent.steps, sent.window),
    failedSteps,
    // Decisions are drawn in the flow tree; joins and merges are part of their construct or step.
    systemRows: steps
      .filter((s) => s.agentId === SYSTEM_AGENT && !(flow && s.stepName === 'decision') && !isJoinRow(s))
      .map((s) => ({ sequence: s.sequence, kind: s.stepName, at: s.completedAt.toISOString() })),
    sessions: analysis.sessions,
    resumePoints: analysis.resumePoints.map((p) => ({ ...p, idleFrom: p.idleFrom.toISOString(), resumedAt: p.resumedAt.toISOString() })),
    attempts,
    sideEffects: sent.sideEffects,
    signals: operations.filter((op) => op.name.startsWith('signal:')).map((op) => ({ name: op.name.slice('signal:'.length), state: op.state, at: op.createdAt.toISOString() })),
    integrity: integrityOf(run, steps, options.integrity),
    checkpoints: { oldest: base, latest: run.lastSequence },
    actions: actionsOf(run, summary, options.actionsAllowed),
    window: sent.window,
  };
}

/** The run part of the page's data: its summary, cursor, who created it (or what it was forked from), its parent. */
function runOfDetail(run: RunRecord, summary: RunSummaryView): RunDetailView['run'] {
  const metadata = parseRecord(run.metadata);
  const forkedFrom = typeof metadata.forkedFrom === 'string' ? { runId: metadata.forkedFrom, atSequence: Number(metadata.atSequence ?? 0) } : null;
  const parentRunId = run.parentRunId ?? (typeof metadata.parentRunId === 'string' ? metadata.parentRunId : null);
  const parent = parentRunId === null ? null : { runId: parentRunId, itemIndex: /^\d+$/.test(metadata.itemIndex ?? '') ? Number(metadata.itemIndex) : null };
  return {
    ...summary,
    cursor: { agentIndex: run.cursorAgent, stepIndex: run.cursorStep },
    lastSequence: run.lastSequence,
    createdBy: forkedFrom ? {} : metadata,
    forkedFrom,
    parent,
  };
}

/** The page's buttons: resume an open run whose lease is free, cancel one not ended, fork any; none unless actions are allowed. */
function actionsOf(run: RunRecord, summary: RunSummaryView, allowed: boolean): RunDetailView['actions'] {
  const terminal = TERMINAL_STATUSES.has(run.status);
  const resumable =
    run.status === 'paused' || run.status === 'failed' || run.status === 'waiting' || (run.status === 'running' && (summary.lease === null || summary.lease.expired));
  return { allowed, resume: allowed && resumable, cancel: allowed && !terminal, fork: allowed };
}

/** Each attempt of a step the operations log records, with the session it ran in. */
function attemptViews(analysis: ReturnType<typeof analyzeSessions>): AttemptView[] {
  return analysis.attempts.map((a) => ({
    stepKey: a.stepKey,
    attempt: a.attempt,
    session: a.session,
    at: a.at.toISOString(),
    state: a.op.state,
    error: a.op.error === null ? null : parseError(a.op.error),
  }));
}

/** The recorded steps as the page draws them: session, origin (copied, restored, executed), retries, model use. */
function stepViewsOf(rows: readonly StepRecord[], operations: readonly OperationRecord[], analysis: ReturnType<typeof analyzeSessions>): StepView[] {
  const latest = analysis.sessions;
  const retriedKeys = new Set(analysis.attempts.map((a) => `${a.stepKey}#${a.session}`));
  const ai = new Map(aiUsageByStep(operations, new Map(rows.map((row) => [`${row.agentId}/${row.stepName}`, row.startedAt]))).map((u) => [u.step, u]));
  return rows.map((row): StepView => {
    const key = `${row.agentId}/${row.stepName}`;
    const session = analysis.sessionOf.get(row.sequence) ?? 0;
    return {
      sequence: row.sequence,
      key,
      agentId: row.agentId,
      agentIndex: row.agentIndex,
      stepIndex: row.stepIndex,
      name: row.stepName,
      path: row.path ?? key,
      status: row.status,
      startedAt: row.startedAt.toISOString(),
      completedAt: row.completedAt.toISOString(),
      durationMs: row.completedAt.getTime() - row.startedAt.getTime(),
      attempt: row.attempt,
      session,
      origin: session === 0 ? 'copied' : session < latest ? 'restored' : 'executed',
      retried: row.attempt > 1 || retriedKeys.has(`${row.path ?? key}#${session}`),
      sideEffectsCommitted: row.sideEffectsCommitted,
      ai: ai.get(key) ?? null,
    };
  });
}

/** The run's side effects (its operations but failed-attempt records and signals). */
function sideEffectViews(operations: readonly OperationRecord[]): RunDetailView['sideEffects'] {
  return operations
    .filter((op) => !op.name.startsWith('attempt:') && !op.name.startsWith('signal:'))
    .map((op) => ({
      stepKey: op.stepKey,
      name: op.name,
      state: op.state,
      attempts: op.attempts,
      createdAt: op.createdAt.toISOString(),
      updatedAt: op.updatedAt.toISOString(),
      error: op.error === null ? null : parseError(op.error),
    }));
}

function failedStepsOf(attempts: readonly AttemptView[], plan: PipelinePlan | undefined): FailedStepView[] {
  const byKey = new Map<string, AttemptView[]>();
  for (const a of attempts) byKey.set(a.stepKey, [...(byKey.get(a.stepKey) ?? []), a]);
  return [...byKey].map(([key, list]) => {
    const last = list[list.length - 1];
    const step = plan?.byKey.get(key);
    // A control-flow step's key is its path (`loop[1]/Fix/apply`): the agent and step are its last two segments.
    const slash = key.lastIndexOf('/');
    const agentFrom = key.lastIndexOf('/', slash - 1) + 1;
    return {
      key,
      agentId: step?.agentId ?? key.slice(agentFrom, slash),
      name: step?.name ?? key.slice(slash + 1),
      agentIndex: step?.agentIndex ?? null,
      stepIndex: step?.stepIndex ?? null,
      attempts: list.length,
      lastError: last.error,
      lastAt: last.at,
    };
  });
}

/**
 * The agents and their steps; with `shown` (the keys of a window's steps), a recorded step outside it is
 * counted in `hidden` instead of listed, so a 20,000-step class does not resend its whole plan on every poll.
 */
function agentsOf(plan: PipelinePlan | undefined, steps: readonly StepView[], failed: readonly FailedStepView[], shown: ReadonlySet<string> | null): RunDetailView['agents'] {
  const recorded = new Set(steps.map((s) => s.key));
  const listed = (key: string) => shown === null || shown.has(key) || !recorded.has(key) || failed.some((f) => f.key === key);
  const agents = new Map<string, { name: string; key: string; index: number }[]>();
  if (plan)
    plan.agents.forEach((a) =>
      agents.set(
        a.id,
        a.steps.map((s, index) => ({ name: s.name, key: s.key, index })),
      ),
    );
  else {
    const seen = new Set<string>(); // step keys listed, so a run of many rows stays linear
    for (const s of [...steps, ...failed]) {
      const list = agents.get(s.agentId) ?? [];
      if (!seen.has(s.key)) {
        seen.add(s.key);
        list.push({ name: s.name, key: s.key, index: s.stepIndex ?? list.length });
      }
      agents.set(s.agentId, list);
    }
  }
  return [...agents].map(([id, list]) => {
    const kept = list.filter((s) => listed(s.key));
    return { id, steps: kept, hidden: list.length - kept.length };
  });
}

/** Parses a stored error; a value that is not `describeError` JSON is shown as its text. */
export function parseError(text: string): ErrorView {
  try {
    const parsed = JSON.parse(text) as Partial<ErrorView> | null;
    if (parsed && typeof parsed === 'object' && typeof parsed.message === 'string') {
      return { name: typeof parsed.name === 'string' ? parsed.name : 'Error', message: parsed.message, code: typeof parsed.code === 'string' ? parsed.code : null };
    }
  } catch {
    // fall through: not JSON
  }
  return { name: 'Error', message: text, code: null };
}

function parseRecord(text: string): Record<string, string> {
  try {
    const parsed = JSON.parse(text) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      return Object.fromEntries(Object.entries(parsed).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
    }
  } catch {
    // encrypted or foreign metadata: show none rather than fail the page
  }
  return {};
}
