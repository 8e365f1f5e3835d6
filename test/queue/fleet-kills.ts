import type { Pool } from 'pg';
import type { ChildExit, ChildHandle } from '../helpers/child-process';

/** One worker process that died (at a fault point, or killed by the test), and when the test saw it die. */
export interface WorkerDeath {
  worker: string;
  /** What killed it: a fault point spec, or a signal sequence. */
  how: string;
  /** `Date.now()` when its exit was observed. */
  diedAt: number;
  exit: ChildExit;
  /** Runs it held when it died: fetched from the queue and not settled. */
  held: string[];
  /** Of those, runs that were already `completed` in the store when the death was observed. */
  doneBeforeDeath: string[];
}

/** Recovery of one death: per held run, the time from the death to its completion by another worker. */
export interface Recovery {
  death: WorkerDeath;
  runs: { runId: string; ms: number }[];
  /** The longest of `runs` (0 when every held run was already complete at the death). */
  maxMs: number;
}

/**
 * The first moment the test saw each run `completed`, by polling the run table: the clock the recovery
 * times are measured on (the same process clock as the deaths). Takes a pool: it polls while the test
 * queries too.
 */
export class CompletionWatch {
  readonly seen = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Pool,
    private readonly schema: string,
    private readonly everyMs = 100,
  ) {}

  start(): this {
    const tick = () => {
      this.polling = this.poll().finally(() => {
        if (this.timer !== undefined) this.timer = setTimeout(tick, this.everyMs);
      });
    };
    this.timer = setTimeout(tick, 0);
    return this;
  }

  async poll(): Promise<void> {
    const { rows } = await this.db.query<{ run_id: string }>(`SELECT run_id FROM "${this.schema}".waypoint_runs WHERE status = 'completed'`);
    const now = Date.now();
    for (const row of rows) if (!this.seen.has(row.run_id)) this.seen.set(row.run_id, now);
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.polling;
  }
}

/** Waits for `child` to exit, stamps the moment, and reads which runs it held from its stdout. */
export async function observeDeath(child: ChildHandle, worker: string, how: string, db: Pool, schema: string): Promise<WorkerDeath> {
  const exit = await child.exited;
  const diedAt = Date.now();
  const held = heldRuns(exit);
  const { rows } = await db.query<{ run_id: string }>(`SELECT run_id FROM "${schema}".waypoint_runs WHERE status = 'completed' AND run_id = ANY($1)`, [held]);
  return { worker, how, diedAt, exit, held, doneBeforeDeath: rows.map((r) => r.run_id) };
}

/** Runs a worker fetched more often than it settled them (its `fetched` / `settled` lines). */
export function heldRuns(exit: ChildExit): string[] {
  const balance = new Map<string, number>();
  for (const line of exit.lines) {
    let event: { event?: string; runId?: string };
    try {
      event = JSON.parse(line) as { event?: string; runId?: string };
    } catch {
      continue; // a SIGKILLed worker's last line may be cut short
    }
    if (!event.runId) continue;
    if (event.event === 'fetched') balance.set(event.runId, (balance.get(event.runId) ?? 0) + 1);
    if (event.event === 'settled') balance.set(event.runId, (balance.get(event.runId) ?? 0) - 1);
  }
  return [...balance]
    .filter(([, n]) => n > 0)
    .map(([runId]) => runId)
    .sort();
}

/** Recovery times of a death's held runs, from the watch (a run not completed yet is left out: check first). */
export function recoveryOf(death: WorkerDeath, watch: CompletionWatch): Recovery {
  const runs = death.held.map((runId) => {
    if (death.doneBeforeDeath.includes(runId)) return { runId, ms: 0 };
    const at = watch.seen.get(runId);
    if (at === undefined) throw new Error(`run ${runId} held by ${death.worker} (${death.how}) has not completed`);
    return { runId, ms: Math.max(0, at - death.diedAt) };
  });
  return { death, runs, maxMs: Math.max(0, ...runs.map((r) => r.ms)) };
}

/** One line per death for the test output. */
export function describeRecovery(r: Recovery): string {
  const runs = r.runs.map((x) => (r.death.doneBeforeDeath.includes(x.runId) ? `${x.runId} done before the kill` : `${x.runId} ${(x.ms / 1000).toFixed(1)} s`));
  return `${r.death.how} (${r.death.worker}): recovered in ${(r.maxMs / 1000).toFixed(1)} s [${runs.join(', ')}]`;
}
