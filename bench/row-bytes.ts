import type { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import type { Backend, BenchWaypoint } from './environment';
import { checkStepColumns, redisStepsKey, STEP_RECORD_COLUMNS, storeTables } from './stored-rows';

/** Stored size of one step row. */
export interface RowSize {
  /** Bytes of the whole stored step row (see the method line of the figure for how, per backend). */
  rowBytes: number;
  /** Bytes of its output column alone. */
  outputBytes: number;
}

/**
 * Reads back from the database how many bytes the step rows at `sequences` take, by the database's own
 * measure where it has one: `pg_column_size` of the row on PostgreSQL, the byte lengths of the columns on
 * SQLite, HSTRLEN of the step's hash entry on Redis.
 *
 * @example
 * const sizes = await storedRowBytes(bw, 'postgres', 'grow-3', [10, 1000], null, '');
 * sizes.get(1000)!.rowBytes
 */
export async function storedRowBytes(
  bw: BenchWaypoint,
  backend: Backend,
  runId: string,
  sequences: number[],
  redis: Redis | null,
  redisPrefix: string,
): Promise<Map<number, RowSize>> {
  const out = new Map<number, RowSize>();
  if (backend === 'redis') {
    if (!redis) throw new Error('no Redis connection to read the stored rows');
    const key = redisStepsKey(redisPrefix, runId);
    for (const sequence of sequences) {
      const [length, [step]] = await Promise.all([redis.hstrlen(key, String(sequence)), bw.store.listSteps(runId, { fromSequence: sequence, toSequence: sequence })]);
      if (length === 0 || step?.sequence !== sequence) throw new Error(`step ${sequence} of '${runId}' is not in ${key}`);
      out.set(sequence, { rowBytes: length, outputBytes: Buffer.byteLength(step.output) });
    }
    return out;
  }
  const dataSource = (bw.store as unknown as { dataSource: DataSource }).dataSource;
  if (backend === 'postgres') {
    const schema = (dataSource.options as { schema?: string }).schema;
    const steps = storeTables(schema).steps;
    const rows = await dataSource.query<{ sequence: number; row_bytes: number; output_bytes: number }[]>(
      `SELECT sequence, pg_column_size(s.*) AS row_bytes, octet_length(output) AS output_bytes FROM ${steps} s WHERE run_id = $1 AND sequence = ANY($2::int[])`,
      [runId, sequences],
    );
    for (const r of rows) out.set(r.sequence, { rowBytes: Number(r.row_bytes), outputBytes: Number(r.output_bytes) });
  } else if (backend === 'sqlite') {
    const steps = storeTables().steps;
    const columns = await dataSource.query<{ name: string }[]>(`SELECT name FROM pragma_table_info('waypoint_steps') ORDER BY cid`);
    checkStepColumns(
      columns.map((c) => c.name),
      'the SQLite steps table',
    );
    const sum = STEP_RECORD_COLUMNS.map((c) => `coalesce(length(CAST(${c} AS BLOB)), 0)`).join(' + ');
    const rows = await dataSource.query<{ sequence: number; row_bytes: number; output_bytes: number }[]>(
      `SELECT sequence, ${sum} AS row_bytes, length(CAST(output AS BLOB)) AS output_bytes FROM ${steps} WHERE run_id = ? AND sequence IN (${sequences.map(() => '?').join(', ')})`,
      [runId, ...sequences],
    );
    for (const r of rows) out.set(r.sequence, { rowBytes: Number(r.row_bytes), outputBytes: Number(r.output_bytes) });
  } else {
    throw new Error(`no stored rows to measure on the ${backend} backend`);
  }
  for (const sequence of sequences) if (!out.has(sequence)) throw new Error(`step ${sequence} of '${runId}' was not found in the ${backend} store`);
  return out;
}
