import { ShutdownHarness } from '../../core/lease/shutdown-harness';
import type { StepEvent, Telemetry } from '../../contract/telemetry';
import { CliLogger } from '../cli-logger';
import { formatDuration, parseDuration } from '../durations';
import { EXIT, usageError, type ExitCode, runNotFound } from '../exit-codes';
import { printJson, type CliIo } from '../output';
import { Progress, progressText } from '../progress';
import { loadRunProgress } from '../../core/history/progress-reads';
import { openSession, type GlobalOptions } from '../session';

export interface ResumeOptions {
  wait?: string;
  grace?: string;
}

/**
 * `waypoint-durable runs resume <id> --module <path>`: continues a run in this process with the pipelines and
 * bindings of the user's module. SIGINT / SIGTERM pause it cleanly at the next step boundary. Exit 0
 * completed, 75 paused or waiting, 1 failed (the error says which step and why), 6 locked by a live worker.
 */
export async function runsResume(globals: GlobalOptions, runId: string, options: ResumeOptions, io: CliIo): Promise<ExitCode> {
  const waitForLockMs = options.wait === undefined ? undefined : parseDuration(options.wait, '--wait');
  const gracePeriodMs = options.grace === undefined ? undefined : parseDuration(options.grace, '--grace');
  const progress = new ResumeProgress(io, runId, globals.progress !== false && !globals.json);
  const session = await openSession(globals, io, { command: 'runs resume', telemetry: progress });
  const harness = new ShutdownHarness(new CliLogger(io, globals.verbose === true)).install();
  try {
    const run = await session.waypoint.store.getRun(runId);
    if (!run) throw runNotFound(runId, session.storeDisplay);
    const plan = session.plans.get(run.pipelineName);
    if (!plan) {
      // A pipeline name altered behind Waypoint's back is corruption, not a module that lacks the pipeline.
      await session.waypoint.verify(runId);
      const known = [...session.plans.keys()];
      throw usageError(
        `Run '${runId}' belongs to pipeline '${run.pipelineName}', which ${known.length ? `the module does not export (it exports ${known.join(', ')}): pass --module <path> exporting it in \`pipelines\`` : 'no module provides: pass --module <path> exporting `pipelines`'}.`,
      );
    }
    // A tree's steps are known only as its decisions are recorded: its bar counts without a total.
    const before = await loadRunProgress(session.waypoint.store, run, plan.version === run.pipelineVersion ? plan : undefined, session.integrity);
    progress.total = plan.linear ? (before.planned ?? undefined) : undefined;
    progress.restored = before.recorded;
    const started = performance.now();
    const result = await session.waypoint.resume(runId, { signal: harness.signal, waitForLockMs, gracePeriodMs });
    progress.done();
    const elapsed = performance.now() - started;
    if (globals.json) printJson(io, { ...result, elapsedMs: Math.round(elapsed) });
    else if (result.stepsExecuted === 0 && result.status === 'completed' && run.status === 'completed') io.out(`Run ${runId} was already completed; nothing to resume.\n`);
    else {
      io.out(
        `Run ${runId} ${result.status}: ${result.stepsSkipped} step(s) restored from checkpoints, ${result.stepsExecuted} executed, ` +
          `${progressText(result.progress)} recorded (last sequence ${result.lastSequence}), in ${formatDuration(elapsed)}.\n`,
      );
      if (result.status !== 'completed') io.out(`Resume it again with: waypoint-durable runs resume ${runId}\n`);
    }
    return result.status === 'completed' ? EXIT.OK : result.status === 'paused' || result.status === 'waiting' ? EXIT.PAUSED : EXIT.FAILURE;
  } finally {
    progress.done();
    harness.dispose();
    await session.close();
  }
}

/** Telemetry that draws the resume's progress: restored steps, then one tick per executed step. */
class ResumeProgress implements Telemetry {
  total: number | undefined;
  /** Steps recorded before this resume (`RunProgress.recorded`), where the bar starts. */
  restored = 0;
  private progress: Progress | undefined;

  constructor(
    private readonly io: CliIo,
    private readonly runId: string,
    private readonly enabled: boolean,
  ) {}

  runStarted(event: { skipped: number; restoreMs: number }): void {
    if (!this.enabled) return;
    this.io.err(`resuming ${this.runId}: ${this.restored} step(s) restored from checkpoints in ${formatDuration(event.restoreMs)}\n`);
    this.progress = new Progress(this.io, this.runId, this.total, true);
    this.progress.tick('', this.restored);
  }

  stepCompleted(event: StepEvent & { durationMs: number }): void {
    this.progress?.tick(`${event.step} (${formatDuration(event.durationMs)})`);
  }

  stepFailed(event: StepEvent & { attempt: number; error: unknown; willRetry: boolean }): void {
    if (!this.enabled) return;
    const message = event.error instanceof Error ? event.error.message : String(event.error);
    this.io.err(`${event.step}: attempt ${event.attempt} failed (${message})${event.willRetry ? '; retrying' : ''}\n`);
  }

  sideEffect(): void {}
  runEnded(): void {}
  leaseLost(): void {}

  span<T>(_name: string, _attributes: Record<string, string | number | boolean>, fn: () => Promise<T>): Promise<T> {
    return fn();
  }

  done(): void {
    this.progress?.done();
  }
}
