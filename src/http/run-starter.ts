import type { Class } from '../decorators/options';
import { describeError } from '../contract/errors';
import type { Logger } from '../contract/logger';
import { TOKENS } from '../contract/tokens';
import { hasFleet } from './run-access';
import type { ResolvedHttpOptions } from './options';

/**
 * Starts and wakes runs for the handler: through the fleet's queue when the Waypoint has one bound,
 * else in this process in the background. A background run is never awaited by a request (the answer
 * comes at once) and never lost: its promise is kept until it settles, its failure logged, and
 * `settled()` waits for all of them (a graceful shutdown).
 */
export class RunStarter {
  private readonly running = new Map<string, Promise<void>>();
  private readonly logger: Logger;

  constructor(private readonly options: ResolvedHttpOptions) {
    this.logger = options.waypoint.container.get(TOKENS.Logger);
  }

  /** Starts (or queues) a run that `prepare` or `enqueue` has created. */
  start(pipeline: Class, runId: string, input: Record<string, unknown>): void {
    this.background(runId, () => this.options.waypoint.run(pipeline, { runId, input }));
  }

  /** Moves a `waiting` run on after a signal: queues it for the fleet, or resumes it here. */
  async wake(pipeline: Class, runId: string): Promise<void> {
    if (hasFleet(this.options)) {
      await this.options.waypoint.enqueue(pipeline, { runId });
      return;
    }
    this.background(runId, () => this.options.waypoint.resume(runId));
  }

  /** Resolves once every background run this handler started has settled. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()]);
  }

  private background(runId: string, advance: () => Promise<{ status: string }>): void {
    // One advance per run from this handler: a second request while it runs would only find it locked.
    if (this.running.has(runId)) return;
    // (A signal delivered while the run was suspending is taken by the run driver itself.)
    const done = advance()
      .then(() => undefined)
      .catch((error: unknown) => this.logger.warn('a run started over HTTP ended with an error', { runId, error: describeError(error) }));
    const tracked = done.finally(() => this.running.delete(runId));
    this.running.set(runId, tracked);
  }
}
