import type { RunStatus } from '../../contract/checkpoint-store';
import type { RunQueue } from '../../contract/run-queue';
import type { RunProgress } from '../history/run-progress';

/** What a caller passes to one `run` / `resume` call and what it gets back (the public types of RunDriver). */

/** Options of one `run` / `resume` call. */
export interface RunOptions<I = Record<string, unknown>> {
  runId: string;
  /** The input state of a new run. Omit (or pass the same value) to resume an existing run. */
  input?: I;
  /** Aborting it pauses the run at the next step boundary (the running step gets a grace period). */
  signal?: AbortSignal;
  /** How long the running step may take to finish after `signal` aborts. Default 10 s. */
  gracePeriodMs?: number;
  /** Wait this long for another executor's lease instead of failing with `RunLockedError`. */
  waitForLockMs?: number;
  /** A hard deadline (Date or epoch ms): the run pauses `deadlineBufferMs` before it. */
  deadline?: Date | number;
  /** Margin before `deadline` at which the pause starts. Default 0. */
  deadlineBufferMs?: number;
  /**
   * Set by a fleet worker for the runs it executes: a `forEach` over a `@Pipeline` class queues its child
   * runs on `queue` (base name `queueName`) for the whole fleet, and the run waits for them without a worker.
   */
  fleet?: RunFleet;
  /**
   * Whether a run found `failed` under the lease runs again from its failed step (a retry). Default true.
   * A fleet worker passes false for the deliveries the runtime made for itself (a wake-up, a recovery): the
   * run may have failed after the delivery was checked, and then nothing runs (`RunNotRetriedError`).
   */
  retryFailed?: boolean;
}

/** The fleet a run is executed by (`RunOptions.fleet`). */
export interface RunFleet {
  queue: RunQueue;
  /** Base queue name of the fleet's workers (`'waypoint'` by default). */
  queueName: string;
}

/** What `run` / `resume` return. */
export interface RunResult<S = Record<string, unknown>> {
  runId: string;
  pipeline: string;
  version: string;
  status: RunStatus;
  /** The shared state after the last recorded step. */
  state: S;
  /** True when the run had recorded steps before this call. */
  resumed: boolean;
  /** Steps run (and recorded) by this call. */
  stepsExecuted: number;
  /** Recorded steps reused instead of run again. */
  stepsSkipped: number;
  /** Sequence of the last recorded step. */
  lastSequence: number;
  /**
   * Steps known so far, `progress.planned` (for a straight line, the pipeline's steps).
   * @deprecated Use `progress.planned`; kept for callers of earlier releases.
   */
  totalSteps: number;
  /** Steps recorded of steps known so far, and forEach items: the figures `waypoint.get(runId).progress` shows. */
  progress: RunProgress;
}
