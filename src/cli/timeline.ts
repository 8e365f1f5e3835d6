import { isJoinRow } from '../core/flow/join-rows';
import { SYSTEM_AGENT, type Integrity } from '../core/history/row-integrity';
import { analyzeSessions, type ResumePoint } from '../core/history/sessions';
import type { PipelinePlan } from '../core/plan/plan-reader';
import type { OperationRecord, OperationState, RunRecord, StepRecord, StepStatus } from '../contract/checkpoint-store';
import { aiUsageByStep, type StepAiUsage } from '../integrations/ai/usage';
import { scanRun } from './integrity-scan';
import { describeValue } from '../core/flow/flow-scope';

/** A side effect of a step, as the committed-operations log has it. */
export interface EffectView {
  name: string;
  state: OperationState;
  attempts: number;
  error: string | null;
}

/** A failed attempt of a step, recorded in the operations log (`attempt:N`). */
export interface FailureView {
  attempt: number;
  at: Date;
  error: string;
}

/** One stored checkpoint row in the timeline. */
export interface TimelineEntry {
  sequence: number;
  /**
   * `agentId/stepName` (the full path for a step inside a control-flow construct), `$waypoint/base` /
   * `$waypoint/patch` for rows the runtime writes itself, or the path of a control-flow decision, join or
   * merge row (`forEach(reviews)#join`, `Planner/plan#merge`).
   */
  step: string;
  kind: 'step' | 'base' | 'patch' | 'decision' | 'join' | 'merge';
  status: StepStatus;
  startedAt: Date;
  completedAt: Date;
  durationMs: number;
  /** Start of the step relative to the run's creation. */
  offsetMs: number;
  attempt: number;
  /** Serialized output plus changed memory, in characters. */
  bytes: number;
  sideEffects: EffectView[];
  failedAttempts: FailureView[];
  /** Why the row fails its integrity check, or null. */
  corrupted: string | null;
  /** Set when a new executor picked the run up right before this row (a resume). */
  resumedBefore: { gapMs: number; why: string } | null;
  /** Model calls, tokens and tool calls recorded by `waypoint/ai` in this step, and what a resume reused; null without any. */
  ai: StepAiUsage | null;
}

/** A plan step with no row yet (needs the pipeline's plan), or a step with log records but no row. */
export interface PendingEntry {
  step: string;
  next: boolean;
  sideEffects: EffectView[];
  failedAttempts: FailureView[];
  /** AI calls recorded so far by the step (none reused yet: the step has not completed). */
  ai: StepAiUsage | null;
}

export interface Timeline {
  entries: TimelineEntry[];
  pending: PendingEntry[];
  /** Resumes found between rows. */
  resumes: number;
  /** Lease acquisitions (and cancellations) so far: the run's fencing epoch. */
  leaseEpoch: number;
  /** A pause between two rows longer than this (ms) counts as a resume. */
  gapThresholdMs: number;
  /** Signals delivered to the run. */
  signals: { name: string; at: Date }[];
}

/**
 * Builds the step timeline of a run from its rows and operations log: durations, attempts, side effects
 * and their state, failed attempts, integrity of each row, and where the run was resumed.
 *
 * Rows carry no worker id, so a resume is inferred, by the same rule as the timeline page
 * (`analyzeSessions`, core/history/sessions.ts): the first step after a fork's copied rows, a step whose attempt
 * numbers restart, and the longest pauses between steps (above `gapMs`, default ten times the run's
 * typical pause and at least 100 ms), never more than the lease takes after the first (epoch - 1): a run
 * executed by one process has none.
 *
 * @example
 * const timeline = buildTimeline(run, steps, await store.listOperations(runId), { integrity: {} });
 */
export function buildTimeline(
  run: RunRecord,
  steps: readonly StepRecord[],
  operations: readonly OperationRecord[],
  options: { integrity: Integrity; gapMs?: number; plan?: PipelinePlan },
): Timeline {
  const effects = groupBy(
    operations.filter((op) => op.stepKey !== '' && !op.name.startsWith('attempt:')),
    (op) => op.stepKey,
  );
  const failures = groupBy(
    operations.filter((op) => op.name.startsWith('attempt:') && op.state === 'failed'),
    (op) => op.stepKey,
  );
  const gaps = steps.slice(1).map((row, i) => row.startedAt.getTime() - steps[i].completedAt.getTime());
  const threshold = options.gapMs ?? Math.max(100, 10 * lowerQuartile(gaps.filter((g) => g >= 0)));

  const completedAttempt = new Map(steps.map((row) => [keyOf(row), row.startedAt]));
  const ai = new Map(aiUsageByStep(operations, completedAttempt).map((usage) => [usage.step, usage]));

  const logs: StepLogs = { effects, failures, ai };
  const resumed = new Map(
    analyzeSessions(run, steps, operations, { minGapMs: threshold })
      .resumePoints.filter((p) => p.beforeSequence !== null)
      .map((p) => [p.beforeSequence!, { gapMs: p.gapMs, why: RESUME_WHY[p.reason] }]),
  );
  const problems = new Map(
    scanRun(run, steps, options.integrity)
      .filter((p) => p.sequence !== null)
      .map((p) => [p.sequence!, p.reason]),
  );
  const entries = steps.map((row, index) => timelineEntry(run, steps, index, logs, resumed.get(row.sequence) ?? null, problems.get(row.sequence) ?? null));
  return {
    entries,
    pending: pendingEntries(run, steps, logs, options.plan),
    resumes: entries.filter((e) => e.resumedBefore).length,
    leaseEpoch: run.leaseEpoch,
    gapThresholdMs: threshold,
    signals: operations.filter((op) => op.name.startsWith('signal:')).map((op) => ({ name: op.name.slice('signal:'.length), at: op.createdAt })),
  };
}

/** The operations log by step key: side effects, failed attempts, and AI usage. */
interface StepLogs {
  effects: Map<string, OperationRecord[]>;
  failures: Map<string, OperationRecord[]>;
  ai: Map<string, StepAiUsage>;
}

/** The timeline entry of `steps[index]`: its failed attempts are those logged since the row before it. */
function timelineEntry(
  run: RunRecord,
  steps: readonly StepRecord[],
  index: number,
  logs: StepLogs,
  resumedBefore: TimelineEntry['resumedBefore'],
  corrupted: string | null,
): TimelineEntry {
  const row = steps[index];
  const key = keyOf(row);
  const kind = row.agentId === SYSTEM_AGENT ? systemKind(row.stepName) : 'step';
  const previous = steps[index - 1];
  const failed = (logs.failures.get(key) ?? [])
    .map(toFailure)
    .filter((f) => !previous || f.at >= previous.completedAt)
    .filter((f) => f.at <= row.completedAt);
  return {
    sequence: row.sequence,
    step: key,
    kind,
    status: row.status,
    startedAt: row.startedAt,
    completedAt: row.completedAt,
    durationMs: row.completedAt.getTime() - row.startedAt.getTime(),
    offsetMs: row.startedAt.getTime() - run.createdAt.getTime(),
    attempt: row.attempt,
    bytes: row.output.length + (row.memory?.length ?? 0),
    sideEffects: kind === 'step' ? (logs.effects.get(key) ?? []).map(toEffect) : [],
    failedAttempts: failed,
    corrupted,
    resumedBefore,
    ai: kind === 'step' ? (logs.ai.get(key) ?? null) : null,
  };
}

/** The plan's steps with no row yet (first the next one), then steps with log records but no row. */
function pendingEntries(run: RunRecord, steps: readonly StepRecord[], logs: StepLogs, plan: PipelinePlan | undefined): PendingEntry[] {
  const recorded = completedKeys(steps);
  const unrecorded = [...new Set([...logs.effects.keys(), ...logs.failures.keys()])].filter((key) => !recorded.has(key));
  // A control-flow plan's steps are templates (`loop[*]/...`): what is still to run there is in the run tree.
  const planned = plan?.linear ? plan.steps.map((s) => s.key).filter((key) => !recorded.has(key)) : [];
  return [...planned, ...unrecorded.filter((key) => !planned.includes(key))].map((key, i) => ({
    step: key,
    next: plan?.linear === true && i === 0 && run.status !== 'completed' && run.status !== 'cancelled',
    sideEffects: (logs.effects.get(key) ?? []).map(toEffect),
    failedAttempts: (logs.failures.get(key) ?? []).map(toFailure).filter((f) => !steps.length || f.at >= steps[steps.length - 1].completedAt),
    ai: logs.ai.get(key) ?? null,
  }));
}

const RESUME_WHY: Record<ResumePoint['reason'], string> = {
  gap: 'a new executor picked the run up',
  attempts: 'attempt numbering restarted: a new executor',
  fork: 'a new executor resumed the fork',
};

/** Step keys recorded by the rows, including those folded into a base snapshot by retention. */
function completedKeys(steps: readonly StepRecord[]): Set<string> {
  const keys = new Set<string>();
  for (const row of steps) {
    if (row.agentId !== SYSTEM_AGENT) keys.add(keyOf(row));
    else if (row.stepName === 'base') {
      try {
        for (const key of (JSON.parse(row.output) as { completed?: string[] }).completed ?? []) keys.add(key);
      } catch {
        // A corrupted base row is reported as such; its step list is simply unknown here.
      }
    }
  }
  return keys;
}

/** The timeline kind of a `$waypoint` row. */
function systemKind(stepName: string): TimelineEntry['kind'] {
  return stepName === 'base' || stepName === 'decision' || stepName === 'join' || stepName === 'merge' ? stepName : 'patch';
}

/** A row's step key as the operations log has it: its path inside a construct, else `agentId/stepName`. */
function keyOf(row: StepRecord): string {
  if (row.agentId === SYSTEM_AGENT && (row.stepName === 'decision' || isJoinRow(row)) && row.path) return row.path;
  return row.agentId !== SYSTEM_AGENT && row.path ? row.path : `${row.agentId}/${row.stepName}`;
}

function toEffect(op: OperationRecord): EffectView {
  return { name: op.name, state: op.state, attempts: op.attempts, error: op.error === null ? null : errorMessage(op.error) };
}

function toFailure(op: OperationRecord): FailureView {
  return { attempt: Number(op.name.slice('attempt:'.length)), at: op.updatedAt, error: op.error === null ? 'unknown error' : errorMessage(op.error) };
}

/** The message of a stored error (`describeError` JSON), or the raw text. */
export function errorMessage(stored: string): string {
  try {
    const parsed = JSON.parse(stored) as { message?: unknown; code?: unknown };
    if (typeof parsed.message === 'string')
      return parsed.code ? `${parsed.message} [${typeof parsed.code === 'string' ? parsed.code : describeValue(parsed.code)}]` : parsed.message;
  } catch {
    // not JSON: shown as stored
  }
  return stored;
}

function groupBy<T>(items: readonly T[], key: (item: T) => string): Map<string, T[]> {
  const map = new Map<string, T[]>();
  for (const item of items) map.set(key(item), [...(map.get(key(item)) ?? []), item]);
  return map;
}

/** The typical pause between two steps of one executor: the lower quartile, which resumes do not inflate. */
function lowerQuartile(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 4)];
}
