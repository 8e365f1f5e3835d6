import type { Logger } from '../../contract/logger';
import { PauseRequest } from '../run/execution';

/** Options of the shutdown harness. */
export interface ShutdownOptions {
  /** Signals that pause the run. Default SIGTERM and SIGINT. */
  signals?: NodeJS.Signals[];
  /** A hard deadline (Date or epoch ms), e.g. a Lambda's or a spot instance's end. */
  deadline?: Date | number;
  /** How long before the deadline to start pausing. Default 0. */
  deadlineBufferMs?: number;
  /**
   * After a signal paused the run, exit the process this long after `runUntilSignal` returns if
   * something (a step that ignored its abort signal) still holds it open. Default 1000; false to never.
   */
  forceExitAfterMs?: number | false;
}

/**
 * Turns process signals (and a deadline) into a pause request for a run: the first signal aborts the
 * harness's `signal` with a `PauseRequest`; the runtime stops starting steps, gives the running step
 * its grace period, checkpoints and releases the lease. Handlers are installed by `install()` only and
 * removed by `dispose()`, so a host application's own handlers are never replaced behind its back.
 *
 * @example
 * const harness = new ShutdownHarness(logger).install();
 * try { await waypoint.run(P, { runId, input, signal: harness.signal }); } finally { harness.dispose(); }
 */
export class ShutdownHarness {
  private readonly controller = new AbortController();
  private readonly handlers = new Map<NodeJS.Signals, () => void>();
  private timer: NodeJS.Timeout | undefined;
  /** The signal that received process signal (if any) triggered the pause. */
  received: NodeJS.Signals | 'deadline' | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly options: ShutdownOptions = {},
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  install(): this {
    for (const name of this.options.signals ?? ['SIGTERM', 'SIGINT']) {
      const handler = () => this.trigger(name);
      this.handlers.set(name, handler);
      process.on(name, handler);
    }
    if (this.options.deadline !== undefined) {
      const at = this.options.deadline instanceof Date ? this.options.deadline.getTime() : this.options.deadline;
      const delay = at - (this.options.deadlineBufferMs ?? 0) - Date.now();
      if (delay <= 0) this.trigger('deadline');
      else {
        this.timer = setTimeout(() => this.trigger('deadline'), delay);
        this.timer.unref();
      }
    }
    return this;
  }

  dispose(): void {
    for (const [name, handler] of this.handlers) process.removeListener(name, handler);
    this.handlers.clear();
    clearTimeout(this.timer);
  }

  private trigger(reason: NodeJS.Signals | 'deadline'): void {
    if (this.controller.signal.aborted) return;
    this.received = reason;
    this.logger.warn(`${reason} received: pausing at the next step boundary, then checkpointing and releasing the lease`, { reason });
    this.controller.abort(new PauseRequest(reason));
  }
}

/** Exit code for a finished `runUntilSignal`: 0 completed, 75 (temporary failure: restart me) paused or waiting, 1 otherwise. */
export function exitCodeFor(status: string): number {
  if (status === 'completed') return 0;
  if (status === 'paused' || status === 'waiting') return 75;
  return 1;
}
