import { createHash } from 'node:crypto';
import type { Pool, PoolClient, QueryResult } from 'pg';
import { WaypointError, storeFailure } from '../../contract/errors';
import type { RunRecord } from '../../contract/checkpoint-store';
import { resolveOptions, type PostgresStoreOptions } from '../sql/options';
import { toRun, type Row } from '../sql/rows';
import { tableNames, type Tables } from '../sql/sql';
import { storePool } from '../sql/store-pool';
import { TypeOrmCheckpointStore } from '../sql/typeorm-store';
import type { StepLogStamp } from './step-cache';
import { pgCheckpointAt, pgStepLogStamp } from './stamp-sql';

/**
 * The PostgreSQL tier: the regular SQL store (every contract method, fenced writes, migrations) plus
 * the few statements of the tiered store's own on the same pool and tables.
 *
 * @example
 * const tier = new PgTier({ type: 'postgres', url, schema: 'waypoint' });
 * await tier.store.init();
 * const stamp = await tier.stepLogStamp('q3-aapl');
 */
export class PgTier {
  readonly store: TypeOrmCheckpointStore;
  readonly tables: Tables;
  private readonly stampSql: string;
  private readonly checkpointAtSql: string;
  private readonly names = new Map<string, string>();

  constructor(options: PostgresStoreOptions) {
    this.store = new TypeOrmCheckpointStore(options);
    const resolved = resolveOptions(options);
    this.tables = tableNames({ schema: resolved.type === 'postgres' ? resolved.schema : undefined, prefix: resolved.tablePrefix });
    this.stampSql = pgStepLogStamp(this.tables);
    this.checkpointAtSql = pgCheckpointAt(this.tables);
  }

  /** The SQL store's `pg` pool (available after `store.init()`; TypeORM stays unloaded). */
  get pool(): Pool {
    return storePool(this.store);
  }

  /**
   * The run row and the bounds of its step log, or null when the run does not exist. On `client` when
   * given (a session that holds a lock: asking the pool then could wait on a connection held by someone
   * waiting for that lock).
   */
  async stepLogStamp(runId: string, client?: PoolClient): Promise<{ run: RunRecord; stamp: StepLogStamp } | null> {
    const res = await this.query('loadRun', runId, this.stampSql, [runId], client);
    const row = res.rows[0];
    if (!row) return null;
    const run = toRun(row);
    const bound = (prefix: 'first' | 'last') =>
      row[`${prefix}_step_sequence`] === null ? null : { sequence: Number(row[`${prefix}_step_sequence`]), checkpointId: String(row[`${prefix}_step_checkpoint`]) };
    return { run, stamp: { lastSequence: run.lastSequence, first: bound('first'), last: bound('last') } };
  }

  /** The sequence and checkpoint id of the run's row at `sequence`, or null (on `client` when given, as above). */
  async checkpointAt(runId: string, sequence: number, client?: PoolClient): Promise<{ sequence: number; checkpointId: string } | null> {
    const row = (await this.query('loadRun', runId, this.checkpointAtSql, [runId, sequence], client)).rows[0];
    return row ? { sequence: Number(row.sequence), checkpointId: String(row.checkpoint_id) } : null;
  }

  /**
   * Runs `work` in a transaction that holds the transaction-level advisory lock `key` (taken first,
   * released by the commit or rollback). A failure of `work` rolls the transaction back.
   */
  async withLock<T>(operation: string, runId: string | undefined, key: string, work: (client: PoolClient) => Promise<T>): Promise<T> {
    let client: PoolClient | undefined;
    let broken: Error | undefined;
    try {
      client = await this.pool.connect();
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1::bigint)', [key]);
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client?.query('ROLLBACK').catch((rollbackError: Error) => (broken = rollbackError));
      if (error instanceof WaypointError) throw error;
      throw storeFailure('postgres', operation, error, runId);
    } finally {
      client?.release(broken);
    }
  }

  /** A named prepared statement on the pool; driver errors become STORE_UNAVAILABLE or STORE_REJECTED. */
  async query(operation: string, runId: string | undefined, text: string, values: unknown[], client?: PoolClient): Promise<QueryResult<Row>> {
    try {
      return await (client ?? this.pool).query<Row>({ name: this.nameOf(text), text, values });
    } catch (error) {
      if (error instanceof WaypointError) throw error;
      throw storeFailure('postgres', operation, error, runId);
    }
  }

  private nameOf(text: string): string {
    let name = this.names.get(text);
    if (!name) {
      name = `waypoint_tier_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
      this.names.set(text, name);
    }
    return name;
  }
}
