import type { CrashPointKind, CrashPointSite } from '../../core/step/crash-points';

/** One crash point of a pipeline, as the reference run passed it. */
export interface CrashPoint {
  /** `before-effect Mailer/send send-email #1`: kind, step, operation, and which passage (1-based) of that place. */
  readonly id: string;
  readonly kind: CrashPointKind;
  /** The step's path; inside a child run, prefixed with the child's place (`/reports/0 > Report/write`). */
  readonly step: string;
  readonly operation?: string;
  /** The nth time the run passed this place (a loop, a retried effect). */
  readonly passage: number;
}

/** Executions of one side effect (by step and operation) in one scenario, per operation key. */
export interface EffectRuns {
  step: string;
  operation: string;
  transactional: boolean;
  /** A recorded model or tool call (`durable()`, durableModel, durableTools), not a `@SideEffect`. */
  call: boolean;
  /** Key (with the scenario's run id replaced) -> times its body started. */
  perKey: Map<string, number>;
}

/** What the runtime passed through in one scenario (a reference run, or a crash and its resume). */
export class Trace {
  readonly points: CrashPoint[] = [];
  readonly effects = new Map<string, EffectRuns>();
  /** Operation key -> a name for it that is the same in every run (`<key: step operation #n>`), to compare states that hold keys. */
  readonly keys = new Map<string, string>();
  private readonly passages = new Map<string, number>();

  constructor(private readonly runId: string) {}

  /** Records a passage of `site`, returns it as a point. */
  pass(site: CrashPointSite): CrashPoint {
    const step = this.stepOf(site);
    const place = `${site.kind} ${step}${site.operation ? ` ${site.operation}` : ''}`;
    const passage = (this.passages.get(place) ?? 0) + 1;
    this.passages.set(place, passage);
    const point: CrashPoint = { id: `${place} #${passage}`, kind: site.kind, step, operation: site.operation, passage };
    this.points.push(point);
    return point;
  }

  /** Counts an effect's body about to run (called for a 'before-effect' the kit lets through). */
  effectStarts(site: CrashPointSite): void {
    const step = this.stepOf(site);
    const id = `${step} ${site.operation}`;
    let runs = this.effects.get(id);
    if (!runs)
      this.effects.set(
        id,
        (runs = { step, operation: site.operation!, transactional: site.transactional === true, call: site.operation?.startsWith('durable:') === true, perKey: new Map() }),
      );
    const key = site.key ?? '';
    if (!this.keys.has(key)) this.keys.set(key, `<key: ${id} #${runs.perKey.size + 1}>`);
    runs.perKey.set(key, (runs.perKey.get(key) ?? 0) + 1);
  }

  private stepOf(site: CrashPointSite): string {
    // A child run (forEach over a @Pipeline) is `<parent>/<into>/<index>`: its place keeps the suffix only.
    return site.runId === this.runId ? site.step : `${site.runId.startsWith(this.runId) ? site.runId.slice(this.runId.length) : site.runId} > ${site.step}`;
  }
}

/** Total body starts of an effect over all its keys. */
export function totalRuns(runs: EffectRuns | undefined): number {
  let n = 0;
  for (const count of runs?.perKey.values() ?? []) n += count;
  return n;
}
