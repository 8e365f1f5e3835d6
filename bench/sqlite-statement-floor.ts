import type { CheckpointStore } from '../src/index';
import { SQLITE_ENCODING, stepRow } from '../src/storage/typeorm/rows';
import { tableNames } from '../src/storage/typeorm/sql';
import { sqliteStatements } from '../src/storage/typeorm/sql-sqlite';
import { type SqliteDatabase, openSqlite } from './floors';
import { benchStepRow } from './store-floor';
import { nextRunId } from './timed-run';

/**
 * A bound between the floor and the store's append on SQLite: the store's own steady insert (the step row,
 * fenced on the run row and sequence-checked against the last step row, committing on its own) run by
 * a raw better-sqlite3 connection on the store's database file with its pragmas, with prebuilt parameters:
 * no store code, no promise. What it costs over the floor's INSERT is the statement's (the wider row, the
 * fence and the check); what `store.appendStep alone` costs over it is the store's JavaScript.
 *
 * @example const steady = SqliteSteadyFloor.open(path, store); const usPerInsert = await steady.batch(100, payload);
 */
export class SqliteSteadyFloor {
  readonly what = 'the steady insert, raw better-sqlite3';
  private readonly insert: ReturnType<SqliteDatabase['prepare']>;

  private constructor(
    private readonly db: SqliteDatabase,
    private readonly store: CheckpointStore,
  ) {
    this.insert = db.prepare(sqliteStatements(tableNames({ prefix: 'waypoint_' })).appendSteady);
  }

  /** `path`: the store's database file; `store`: the same store, to create and lease each batch's run. */
  static open(path: string, store: CheckpointStore): SqliteSteadyFloor {
    return new SqliteSteadyFloor(openSqlite(path), store);
  }

  /** Inserts n prebuilt step rows of a fresh, leased run, one statement (and commit) each; µs per insert. */
  async batch(n: number, payload: string): Promise<number> {
    const runId = nextRunId('steady');
    await this.store.createRun({ runId, pipelineName: 'steady', pipelineVersion: '1.0.0', input: '{"subject":"bench"}', metadata: '{}' });
    const lease = await this.store.acquireLease(runId, 'bench-steady', 30_000);
    if (!lease) throw new Error(`could not lease '${runId}'`);
    const rows = Array.from({ length: n }, (_, i) => ({
      ...(stepRow(benchStepRow(runId, i + 1, payload), SQLITE_ENCODING) as Record<string, unknown>),
      epoch: lease.epoch,
      cursor_agent: 0,
      cursor_step: i + 1,
      resume_hint: null,
    }));
    const start = performance.now();
    for (const row of rows) if (this.insert.run(row).changes !== 1) throw new Error(`the steady insert of '${runId}' was refused`);
    const perInsert = ((performance.now() - start) * 1000) / n;
    await this.store.releaseLease(runId, 'bench-steady', lease.epoch);
    return perInsert;
  }

  close(): Promise<void> {
    this.db.close();
    return Promise.resolve();
  }
}
