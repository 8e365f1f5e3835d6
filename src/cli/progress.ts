import type { RunProgress } from '../core/history/run-progress';
import type { CliIo } from './output';

/**
 * A run's progress as every command prints it: steps recorded / steps known so far (`?` while unknown: no
 * plan and not completed), then the forEach items.
 *
 * @example
 * progressText({ recorded: 9, planned: 12, items: { done: 2, total: 3 } }); // '9/12 steps, 2/3 items'
 */
export function progressText(progress: RunProgress): string {
  const steps = `${progress.recorded}/${progress.planned ?? '?'} steps`;
  return progress.items ? `${steps}, ${progress.items.done}/${progress.items.total} items` : steps;
}

/**
 * Progress of a long command on stderr: on a terminal a bar redrawn in place (at most every 100 ms);
 * otherwise plain lines (every item for short jobs, each 10% for long ones) that read well in CI logs
 * and `kubectl logs`. Disabled, it prints nothing.
 *
 * @example
 * const progress = new Progress(io, 'verify', runs.length, true);
 * for (const run of runs) { await check(run); progress.tick(run.runId); }
 * progress.done();
 */
export class Progress {
  private count = 0;
  private drawnAt = 0;
  private lastDecile = 0;
  private drawn = false;

  constructor(
    private readonly io: CliIo,
    private readonly label: string,
    private total: number | undefined,
    private readonly enabled: boolean,
  ) {}

  /** Sets (or corrects) the total once it is known. */
  setTotal(total: number): void {
    this.total = total;
  }

  /** `n` more items done; `detail` names the last one. */
  tick(detail = '', n = 1): void {
    this.count += n;
    if (!this.enabled) return;
    if (this.io.errIsTTY) {
      const now = performance.now();
      if (now - this.drawnAt < 100 && this.count !== this.total) return;
      this.drawnAt = now;
      this.io.err(`\r\x1b[2K${this.line(detail, true)}`);
      this.drawn = true;
      return;
    }
    const total = this.total;
    const decile = total ? Math.floor((this.count * 10) / total) : 0;
    if (total === undefined || total <= 20 || decile > this.lastDecile) {
      this.lastDecile = decile;
      this.io.err(`${this.line(detail, false)}\n`);
    }
  }

  /** Clears the bar (on a terminal); the command prints its own summary. */
  done(): void {
    if (this.enabled && this.io.errIsTTY && this.drawn) this.io.err('\r\x1b[2K');
    this.drawn = false;
  }

  private line(detail: string, bar: boolean): string {
    const total = this.total;
    const counter = total === undefined ? `${this.count}` : `${this.count}/${total}`;
    const width = 24;
    const filled = total ? Math.min(width, Math.round((this.count / total) * width)) : 0;
    const graphic = bar && total ? ` [${'#'.repeat(filled)}${'-'.repeat(width - filled)}]` : '';
    return `${this.label}${graphic} ${counter}${detail ? ` ${detail}` : ''}`;
  }
}
