import type { OperationRecord, RunRecord, StepRecord } from '../../contract/checkpoint-store';
import { SYSTEM_AGENT, rowPath } from './row-integrity';

/**
 * Where one executor session ended and the next began (a crash and a restart, a pause and a resume, a
 * fork being resumed): the steps before it were restored from checkpoints by the sessions after it.
 */
export interface ResumePoint {
  /** Number (1-based) of the session that starts here. */
  session: number;
  /** Last sequence recorded before the new session started (0 when none). */
  afterSequence: number;
  /** First sequence the new session recorded, or null when it has recorded none yet (failed, or still on the step). */
  beforeSequence: number | null;
  /** Key of the step the new session started with (its path in a construct, else `agentId/stepName`). */
  stepKey: string;
  /** Last activity known before the resume. */
  idleFrom: Date;
  /** First activity known of the new session (an attempt's end is used when its start is not recorded). */
  resumedAt: Date;
  gapMs: number;
  /**
   * Why the boundary is placed here: `fork` (first step after rows copied by a fork), `attempts` (a
   * step's attempt numbers restart, which only a new session does), `gap` (one of the largest idle gaps
   * between steps, within the run's number of lease acquisitions).
   */
  reason: 'fork' | 'attempts' | 'gap';
}

/** A failed attempt from the operations log, placed in its session. */
export interface AttemptRecord {
  stepKey: string;
  attempt: number;
  at: Date;
  session: number;
  op: OperationRecord;
}

export interface SessionAnalysis {
  /** Session of each step row by sequence; 0 for rows a fork copied from another run. */
  sessionOf: Map<number, number>;
  /** Number of sessions seen (0 when nothing ran). */
  sessions: number;
  resumePoints: ResumePoint[];
  attempts: AttemptRecord[];
}

export interface SessionOptions {
  /** Idle gaps shorter than this are never resume points. Default 100 ms (a process restart takes longer). */
  minGapMs?: number;
}

const ATTEMPT_NAME = /^attempt:(\d+)$/;

/** An attempt of a step: a failed one from the operations log, or the recorded successful one. */
interface AttemptEvent {
  attempt: number;
  at: Date;
  op?: OperationRecord;
  row?: StepRecord;
}

/** A place where a new session may have started, before attempt event `event` of a unit. */
interface Boundary {
  unit: number;
  event: number;
  forced: ResumePoint['reason'] | null;
  idleFrom: Date;
  at: Date;
  afterSequence: number;
  beforeSequence: number | null;
  stepKey: string;
}

/**
 * Splits a run's history into executor sessions and marks the resume points between them. The one
 * resume-point algorithm: the timeline page (src/ui) and `runs show` (src/cli/timeline.ts) both use it.
 *
 * Step rows do not record which lease epoch wrote them, so sessions are inferred from evidence, in
 * this order (docs/ui.md explains the rule and its limits):
 * 1. a fork: the first step after the copied rows (checkpoint ids ending in `:fork`) starts a session;
 * 2. attempt numbers: within a session a step's attempts count 1, 2, 3...; a count that restarts (a
 *    failed `attempt:2` followed by a successful attempt 1) proves a new session;
 * 3. idle gaps: every lease acquisition bumps the run's `leaseEpoch` (and so does a cancel), so a run
 *    had at most `leaseEpoch - 1` resumes. The remaining budget goes to the largest idle gaps before a
 *    step's first attempt, when at least `minGapMs` long. A run leased once never shows a resume point.
 *
 * @example
 * const { resumePoints } = analyzeSessions(run, steps, await store.listOperations(run.runId));
 */
export function analyzeSessions(run: RunRecord, steps: readonly StepRecord[], operations: readonly OperationRecord[], options: SessionOptions = {}): SessionAnalysis {
  const minGapMs = options.minGapMs ?? 100;
  const rows = steps.filter((s) => s.agentId !== SYSTEM_AGENT);
  const copied = rows.filter((s) => s.checkpointId.endsWith(':fork'));
  const own = rows.filter((s) => !s.checkpointId.endsWith(':fork'));
  const units = attemptUnits(own, operations);

  const boundaries: Boundary[] = [];
  let prevEnd = copied.length > 0 ? copied[copied.length - 1].completedAt : run.createdAt;
  let afterSequence = copied.length > 0 ? copied[copied.length - 1].sequence : 0;
  units.forEach((unit, u) => {
    const recorded = unit.events.find((e) => e.row)?.row;
    unit.events.forEach((event, e) => {
      const previous = e === 0 ? null : unit.events[e - 1];
      const reset = previous !== null && event.attempt !== previous.attempt + 1;
      const forced = e === 0 && u === 0 && copied.length > 0 ? 'fork' : reset ? 'attempts' : null;
      if (e === 0 || reset) {
        const idleFrom = previous ? previous.at : prevEnd;
        boundaries.push({ unit: u, event: e, forced, idleFrom, at: event.at, afterSequence, beforeSequence: recorded?.sequence ?? null, stepKey: unit.key });
      }
    });
    if (recorded) {
      prevEnd = recorded.completedAt;
      afterSequence = recorded.sequence;
    }
  });

  const forced = boundaries.filter((b) => b.forced !== null);
  // A cancel bumps the epoch without starting a session.
  const budget = Math.max(0, run.leaseEpoch - 1 - (run.status === 'cancelled' ? 1 : 0) - forced.length);
  const gaps = boundaries
    .filter((b) => b.forced === null && gapOf(b) >= minGapMs)
    .sort((a, b) => gapOf(b) - gapOf(a))
    .slice(0, budget);
  const chosen = new Set<Boundary>([...forced, ...gaps]);
  // Each event's boundary by unit and event index, so a long run's walk below stays linear.
  const boundaryAt = new Map(boundaries.map((b) => [`${b.unit}:${b.event}`, b]));

  const sessionOf = new Map<number, number>(copied.map((s) => [s.sequence, 0]));
  const attempts: AttemptRecord[] = [];
  const resumePoints: ResumePoint[] = [];
  // Copied rows are session 0, so the session resuming a fork is 1; otherwise the first session is 1.
  let session = copied.length > 0 ? 0 : 1;
  units.forEach((unit, u) => {
    unit.events.forEach((event, e) => {
      const boundary = boundaryAt.get(`${u}:${e}`);
      if (boundary && chosen.has(boundary)) {
        session += 1;
        resumePoints.push({
          session,
          afterSequence: boundary.afterSequence,
          beforeSequence: boundary.beforeSequence,
          stepKey: boundary.stepKey,
          idleFrom: boundary.idleFrom,
          resumedAt: boundary.at,
          gapMs: gapOf(boundary),
          reason: boundary.forced ?? 'gap',
        });
      }
      if (event.row) sessionOf.set(event.row.sequence, session);
      if (event.op) attempts.push({ stepKey: unit.key, attempt: event.attempt, at: event.at, session, op: event.op });
    });
  });
  return { sessionOf, sessions: units.length === 0 ? 0 : session, resumePoints, attempts };
}

function gapOf(b: Pick<Boundary, 'idleFrom' | 'at'>): number {
  // Steps of one session may overlap (parallel branches), so a step starting before the previous row ended is no evidence.
  return Math.max(0, b.at.getTime() - b.idleFrom.getTime());
}

/**
 * Per step (in recording order, then steps that never got a row): its failed attempts from the
 * operations log and its recorded successful attempt, oldest first.
 */
function attemptUnits(rows: readonly StepRecord[], operations: readonly OperationRecord[]): { key: string; events: AttemptEvent[] }[] {
  const failed = new Map<string, AttemptEvent[]>();
  for (const op of operations) {
    const match = ATTEMPT_NAME.exec(op.name);
    if (!match) continue;
    const list = failed.get(op.stepKey) ?? [];
    list.push({ attempt: Number(match[1]), at: op.createdAt, op });
    failed.set(op.stepKey, list);
  }
  const byTime = (a: AttemptEvent, b: AttemptEvent) => a.at.getTime() - b.at.getTime() || a.attempt - b.attempt;
  const units = rows.map((row) => {
    const key = rowPath(row);
    const before = (failed.get(key) ?? []).filter((e) => e.at.getTime() <= row.startedAt.getTime()).sort(byTime);
    failed.set(
      key,
      (failed.get(key) ?? []).filter((e) => !before.includes(e)),
    );
    return { key, events: [...before, { attempt: row.attempt, at: row.startedAt, row }] };
  });
  // Attempts of steps with no row: the step the run failed on, or is still retrying.
  const rest = [...failed].filter(([, events]) => events.length > 0).map(([key, events]) => ({ key, events: events.sort(byTime) }));
  rest.sort((a, b) => byTime(a.events[0], b.events[0]));
  return [...units, ...rest];
}
