import type { BenchWaypoint } from './environment';
import { diffCounts, totalOf, type PgStatementCounter } from './instruments';
import type { StepHooks } from './pipeline';

/** One resume of a paused run that runs exactly one new step and pauses again. */
export interface ResumeMeasurement {
  /** From the `resume` call to the first new step's append being acknowledged (durable), µs. */
  toFirstStepUs: number;
  /** The whole `resume` call, including the pause write and lease release after the step, µs. */
  totalUs: number;
  /** Store calls until the first new step was durable, by method. */
  callsToFirstStep: Record<string, number>;
  /** PostgreSQL statements sent until then (0 when not counted). */
  statementsToFirstStep: number;
  /** Store calls of the whole call. */
  callsTotal: Record<string, number>;
}

/**
 * Resumes `runId`, lets its first new step complete and be recorded, then pauses it (the step aborts
 * the run's signal, so the executor stops at the next boundary). The run stays paused for the next one.
 *
 * @example
 * const m = await measureResume(bw, 'grow-7', hooks, pgCounter);
 * m.toFirstStepUs; totalOf(m.callsToFirstStep) // e.g. 5
 */
export async function measureResume(bw: BenchWaypoint, runId: string, hooks: StepHooks, pg?: PgStatementCounter): Promise<ResumeMeasurement> {
  const stop = new AbortController();
  let stepped = false;
  hooks.onStep = () => {
    if (stepped) return;
    stepped = true;
    stop.abort('bench: one step per resume');
  };
  let doneAt = 0;
  let callsAtDone: Record<string, number> = {};
  let statementsAtDone = 0;
  bw.calls.onResolved = (method) => {
    if ((method !== 'appendStep' && method !== 'appendRun') || doneAt !== 0) return; // a reducer step's row leaves with its merge row
    doneAt = performance.now();
    callsAtDone = bw.calls.snapshot();
    statementsAtDone = pg?.total ?? 0;
  };
  const before = bw.calls.snapshot();
  const statementsBefore = pg?.total ?? 0;
  if (pg) pg.active = true;
  const start = performance.now();
  let result;
  try {
    result = await bw.waypoint.resume(runId, { signal: stop.signal });
  } finally {
    if (pg) pg.active = false;
    bw.calls.onResolved = null;
    hooks.onStep = undefined;
  }
  const end = performance.now();
  if (result.status !== 'paused' || result.stepsExecuted !== 1 || doneAt === 0) {
    throw new Error(`resume of '${runId}' ended ${result.status} after ${result.stepsExecuted} steps; expected one step and a pause`);
  }
  const callsToFirstStep = diffCounts(callsAtDone, before);
  if (totalOf(callsToFirstStep) === 0) throw new Error('resume: no store call was counted');
  return {
    toFirstStepUs: (doneAt - start) * 1000,
    totalUs: (end - start) * 1000,
    callsToFirstStep,
    statementsToFirstStep: statementsAtDone - statementsBefore,
    callsTotal: diffCounts(bw.calls.snapshot(), before),
  };
}
