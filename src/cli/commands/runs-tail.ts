import { EXIT, type ExitCode, runNotFound } from '../exit-codes';
import type { CliIo } from '../output';
import { openSession, type GlobalOptions } from '../session';
import { parseCount } from '../durations';
import { StreamTextView } from '../stream-text';

export interface TailOptions {
  from?: string;
  /** Commander's `--no-follow` sets it false. */
  follow?: boolean;
}

/**
 * `waypoint-durable runs tail <id> [--from N] [--no-follow]`: prints the run's live output as it comes
 * (text joined inline, other parts as JSON lines, retractions and status changes as lines; `--json`:
 * one event per line, as `waypoint.stream` yields it) and ends when the run ends. Ctrl-C stops it.
 * Exit 1 when the run ended failed, 0 otherwise.
 */
export async function runsTail(globals: GlobalOptions, runId: string, options: TailOptions, io: CliIo): Promise<ExitCode> {
  const from = options.from === undefined ? 0 : parseCount(options.from, '--from', 0);
  const session = await openSession(globals, io, { command: 'runs tail' });
  const stop = new AbortController();
  const interrupt = () => stop.abort();
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  try {
    if (!(await session.waypoint.store.getRun(runId))) throw runNotFound(runId, session.storeDisplay);
    const view = new StreamTextView();
    for await (const event of session.waypoint.stream(runId, { from, follow: options.follow !== false, signal: stop.signal })) {
      io.out(globals.json ? `${JSON.stringify(event)}\n` : view.render(event));
    }
    if (!globals.json) io.out(view.end());
    const run = await session.waypoint.store.getRun(runId);
    return run?.status === 'failed' && options.follow !== false && !stop.signal.aborted ? EXIT.FAILURE : EXIT.OK;
  } finally {
    process.off('SIGINT', interrupt);
    process.off('SIGTERM', interrupt);
    await session.close();
  }
}
