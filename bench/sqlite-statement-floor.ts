import type { CheckpointStore, StepAppend } from '../src/index';
import { type SqliteDatabase, openSqlite } from './floors';
import { benchStepRow } from './store-floor';
import { stepColumns } from './stored-rows';
import { nextRunId } from './timed-run';

/**
 * A bound between the floor and the store's append on SQLite: the store's own steady insert (the step row,
 * fenced on the run row and sequence-checked against the last step row, committing on its own) run by
 * a raw better-sqlite3 connection on the store's database file with its pragmas, with prebuilt parameters:
 * no store code, no promise. What it costs over the floor's INSERT is the statement's (the wider row, the
 * fence and the check); what `store.appendStep alone` costs over it is the store's JavaScript.
 *
 * The statement is the one the store runs: taken from one real `store.appendStep` (better-sqlite3's
 * `Statement#run` watched for that call), and the parameters the bench builds are checked against the
 * ones the store bound there.
 *
 * @example const steady = await SqliteSteadyFloor.open(path, store); const usPerInsert = await steady.batch(100, payload);
 */
export class SqliteSteadyFloor {
  readonly what = 'the steady insert, raw better-sqlite3';
  private readonly insert: ReturnType<SqliteDatabase['prepare']>;

  private constructor(
    private readonly db: SqliteDatabase,
    private readonly store: CheckpointStore,
    statement: string,
  ) {
    this.insert = db.prepare(statement);
  }

  /** `path`: the store's database file; `store`: the same store, to create and lease each batch's run. */
  static async open(path: string, store: CheckpointStore): Promise<SqliteSteadyFloor> {
    const db = openSqlite(path);
    try {
      return new SqliteSteadyFloor(db, store, await steadyStatement(db, store));
    } catch (error) {
      db.close();
      throw error;
    }
  }

  /** Inserts n prebuilt step rows of a fresh, leased run, one statement (and commit) each; µs per insert. */
  async batch(n: number, payload: string): Promise<number> {
    const runId = nextRunId('steady');
    const epoch = await leasedRun(this.store, runId);
    const rows = Array.from({ length: n }, (_, i) => steadyParams(steadyAppend(runId, i + 1, payload, epoch)));
    const start = performance.now();
    for (const row of rows) if (this.insert.run(row).changes !== 1) throw new Error(`the steady insert of '${runId}' was refused`);
    const perInsert = ((performance.now() - start) * 1000) / n;
    await this.store.releaseLease(runId, 'bench-steady', epoch);
    return perInsert;
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }
}

type Run = (this: unknown, ...args: unknown[]) => { changes: number };

/**
 * The text of the statement the store runs for a step that leaves its run running: the first statement
 * run during one `appendStep` of a fresh leased run (every better-sqlite3 statement shares the prototype
 * of `db`'s), checked to be an insert whose parameters are those `steadyParams` builds.
 */
async function steadyStatement(db: SqliteDatabase, store: CheckpointStore): Promise<string> {
  const prototype = Object.getPrototypeOf(db.prepare('SELECT 1')) as { run: Run };
  const original = prototype.run;
  const seen: { source: string; params: unknown }[] = [];
  const runId = nextRunId('steady-capture');
  const append = steadyAppend(runId, 1, 'x', await leasedRun(store, runId));
  prototype.run = function (this: unknown, ...args: unknown[]) {
    seen.push({ source: (this as { source: string }).source, params: args[0] });
    return original.apply(this, args);
  };
  try {
    await store.appendStep(append);
  } finally {
    prototype.run = original;
  }
  await store.releaseLease(runId, 'bench-steady', append.fence.epoch);
  const first = seen[0];
  if (!first || !/^INSERT INTO "waypoint_steps"/.test(first.source)) {
    throw new Error(`the store's steady append was not the first statement of appendStep (saw: ${seen.map((s) => s.source.slice(0, 40)).join(' | ') || 'none'})`);
  }
  const expected = JSON.stringify(Object.entries(steadyParams(append)).sort());
  if (JSON.stringify(Object.entries(first.params as object).sort()) !== expected) {
    throw new Error(`the store bound other parameters than the bench builds for its steady append: update bench/stored-rows.ts`);
  }
  return first.source;
}

async function leasedRun(store: CheckpointStore, runId: string): Promise<number> {
  await store.createRun({ runId, pipelineName: 'steady', pipelineVersion: '1.0.0', input: '{"subject":"bench"}', metadata: '{}' });
  const lease = await store.acquireLease(runId, 'bench-steady', 30_000);
  if (!lease) throw new Error(`could not lease '${runId}'`);
  return lease.epoch;
}

function steadyAppend(runId: string, sequence: number, payload: string, epoch: number): StepAppend {
  return { step: benchStepRow(runId, sequence, payload), run: { cursorAgent: 0, cursorStep: sequence, status: 'running', resumeHint: null }, fence: { epoch } };
}

/** The named parameters of the steady insert: the step row (SQLite encoding), the fence and the cursor after it. */
function steadyParams({ step, run, fence }: StepAppend): Record<string, unknown> {
  return { ...stepColumns(step, 'sqlite'), epoch: fence.epoch, cursor_agent: run.cursorAgent, cursor_step: run.cursorStep, resume_hint: run.resumeHint ?? null };
}
