import type { Class } from '../decorators/options';
import type { Logger } from '../contract/logger';
import { childLogger } from '../core/ports/logger';
import { readPlan } from '../core/plan/plan-reader';
import { exitCodeFor, ShutdownHarness, type ShutdownOptions } from '../core/lease/shutdown-harness';
import type { RunOptions, RunResult } from '../core/run/run-options';

/**
 * `waypoint.runUntilSignal`: `run` with SIGTERM / SIGINT (and an optional deadline) turned into a clean
 * pause, the handlers installed for this call only; sets `process.exitCode` (0 completed, 75 paused or
 * waiting) so a supervisor knows to restart the process.
 *
 * @example
 * return runUntilSignal((p, o) => waypoint.run(p, o), logger, FinancialAnalysis, { runId, input }, { deadline });
 */
export async function runUntilSignal<S>(
  run: (pipeline: Class, options: RunOptions) => Promise<RunResult<S>>,
  logger: Logger,
  pipeline: Class,
  options: RunOptions,
  shutdown: ShutdownOptions,
): Promise<RunResult<S>> {
  const harness = new ShutdownHarness(childLogger(logger, { runId: options.runId, pipeline: readPlan(pipeline).name }), shutdown).install();
  try {
    const signal = options.signal ? AbortSignal.any([options.signal, harness.signal]) : harness.signal;
    // The harness alone owns the shutdown deadline: a second timer in the run raced it, and when the
    // run's fired first the pause was not reported as the harness's.
    const result = await run(pipeline, { ...options, signal });
    const code = exitCodeFor(result.status);
    process.exitCode = code;
    if (harness.received) {
      process.stderr.write(`waypoint: run '${result.runId}' ${result.status} after ${harness.received} at sequence ${result.lastSequence}; safe to restart.\n`);
      // An abandoned step that ignored its abort signal may keep the event loop alive; the timer is
      // unref'd, so it only fires if something still holds the process open.
      const after = shutdown.forceExitAfterMs ?? 1000;
      if (after !== false) setTimeout(() => process.exit(code), after).unref();
    }
    return result;
  } finally {
    harness.dispose();
  }
}
