import type { Clock } from '../../contract/clock';
import { PauseRequest } from '../step/run-executor';
import type { RunOptions } from './run-options';

/*
 * A run's deadline (`RunOptions.deadline`, e.g. a Lambda's end): a pause requested `deadlineBufferMs`
 * before it, and a grace period for the running step that ends before it.
 */

/** Arms the pause at the deadline minus its buffer; at once (no step starts) when that is already past. */
export function armDeadline(options: RunOptions, stop: AbortController, clock: Clock): NodeJS.Timeout | undefined {
  if (options.deadline === undefined) return undefined;
  const at = options.deadline instanceof Date ? options.deadline.getTime() : options.deadline;
  const delay = at - (options.deadlineBufferMs ?? 0) - clock.now().getTime();
  if (delay <= 0) {
    // Already inside the buffer: start no step at all.
    stop.abort(new PauseRequest('deadline'));
    return undefined;
  }
  const timer = setTimeout(() => stop.abort(new PauseRequest('deadline')), delay);
  timer.unref();
  return timer;
}

/**
 * The running step's grace period after a stop. With a hard deadline the grace must end before it, with
 * a quarter of the buffer kept for the pause write itself.
 */
export function graceFor(options: RunOptions): number {
  const grace = options.gracePeriodMs ?? 10_000;
  if (options.deadline === undefined) return grace;
  return Math.max(0, Math.min(grace, Math.floor((options.deadlineBufferMs ?? 0) * 0.75)));
}
