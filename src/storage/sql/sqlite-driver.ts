import type { StepAppend } from '../../contract/checkpoint-store';
import { sleep } from './ops';
import { type Row, SQLITE_ENCODING, stepRow } from './rows';
import { SQLITE_BEGIN_IMMEDIATE } from './sql-sqlite';

/**
 * The slice of better-sqlite3's API the store uses (the package ships no types), and the pieces of
 * work the store and its step transactions share on that connection.
 */
export interface Statement {
  run(params?: object): { changes: number };
  get(params?: object): Row | undefined;
  all(params?: object): Row[];
}
export type Transaction<A extends unknown[], R> = ((...args: A) => R) & { immediate(...args: A): R; deferred(...args: A): R };
export interface Database {
  prepare(sql: string): Statement;
  exec(sql: string): void;
  pragma(sql: string): unknown;
  transaction<A extends unknown[], R>(fn: (...args: A) => R): Transaction<A, R>;
  readonly inTransaction: boolean;
}

/** The prepared statements a step append runs, in the caller's transaction. */
export interface AppendStatements {
  appendSteady: Statement;
  appendStep: Statement;
  transitionRun: Statement;
}

/** The named parameters of `appendSteady` and `appendStep`: the step row, the fence and the cursor after it. */
function appendParams({ step, run, fence }: StepAppend): Record<string, unknown> {
  const row = stepRow(step, SQLITE_ENCODING) as Record<string, unknown>;
  row.epoch = fence.epoch;
  row.cursor_agent = run.cursorAgent;
  row.cursor_step = run.cursorStep;
  row.resume_hint = run.resumeHint ?? null;
  return row;
}

/**
 * The steady append alone, for a run that stays running: one INSERT ... SELECT, which needs no transaction
 * of its own (a writing statement takes the write lock before it reads, so the fence and sequence it
 * checks cannot move under it). True when it wrote the row; false when the stored run is not running
 * with the append's hint or the fence or sequence is stale (nothing written: the caller goes on with
 * `writeAppend`).
 */
export function writeSteadyAppend(stmts: AppendStatements, append: StepAppend): boolean {
  return append.run.status === 'running' && stmts.appendSteady.run(appendParams(append)).changes === 1;
}

/**
 * A step append, inside a transaction the caller holds: the fenced, sequence-checked insert of the step
 * row (with the cursor after it), then the run row only when the append changes its status or hint. A
 * run that stays running with its stored hint takes the steady insert alone, unless `steadyTried` says
 * the caller already tried it. False (nothing written) when the fence or the sequence is stale.
 */
export function writeAppend(stmts: AppendStatements, append: StepAppend, now: number, steadyTried = false): boolean {
  const { step, run } = append;
  const row = appendParams(append);
  if (!steadyTried && run.status === 'running' && stmts.appendSteady.run(row).changes === 1) return true;
  if (stmts.appendStep.run(row).changes === 0) return false;
  stmts.transitionRun.run({
    run_id: step.runId,
    sequence: step.sequence,
    cursor_agent: run.cursorAgent,
    cursor_step: run.cursorStep,
    status: run.status,
    resume_hint: run.resumeHint ?? null,
    now,
  });
  return true;
}

/**
 * BEGIN IMMEDIATE without blocking the event loop: better-sqlite3 waits for a busy lock synchronously,
 * which would deadlock against another store in this same process that holds the lock across an await.
 * So the wait is a non-blocking retry loop with busy_timeout off, for up to `waitMs`.
 */
export async function beginImmediate(db: Database, busyTimeoutMs: number, waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  db.pragma('busy_timeout = 0');
  try {
    for (;;) {
      try {
        db.exec(SQLITE_BEGIN_IMMEDIATE);
        return;
      } catch (err) {
        if ((err as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() > deadline) throw err;
        await sleep(5 + Math.random() * 20);
      }
    }
  } finally {
    db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  }
}
