import type { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import { decodeStep } from '../src/storage/redis/codec';
import { redisKeys } from '../src/storage/redis/keys';
import { STEP_COLUMNS, tableNames } from '../src/storage/typeorm/sql';
import { DEFAULT_TABLE_PREFIX } from '../src/storage/typeorm/options';
import type { Backend, BenchWaypoint } from './environment';

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
    const key = redisKeys(redisPrefix).steps(runId);
    for (const sequence of sequences) {
      const [length, text] = await Promise.all([redis.hstrlen(key, String(sequence)), redis.hget(key, String(sequence))]);
      if (!text) throw new Error(`step ${sequence} of '${runId}' is not in ${key}`);
      out.set(sequence, { rowBytes: length, outputBytes: Buffer.byteLength(decodeStep(runId, String(sequence), text).output) });
    }
    return out;
  }
  const dataSource = (bw.store as unknown as { dataSource: DataSource }).dataSource;
  if (backend === 'postgres') {
    const schema = (dataSource.options as { schema?: string }).schema;
    const steps = tableNames({ schema, prefix: DEFAULT_TABLE_PREFIX }).steps;
    const rows = await dataSource.query<{ sequence: number; row_bytes: number; output_bytes: number }[]>(
      `SELECT sequence, pg_column_size(s.*) AS row_bytes, octet_length(output) AS output_bytes FROM ${steps} s WHERE run_id = $1 AND sequence = ANY($2::int[])`,
      [runId, sequences],
    );
    for (const r of rows) out.set(r.sequence, { rowBytes: Number(r.row_bytes), outputBytes: Number(r.output_bytes) });
  } else if (backend === 'sqlite') {
    const steps = tableNames({ prefix: DEFAULT_TABLE_PREFIX }).steps;
    const sum = STEP_COLUMNS.map((c) => `coalesce(length(CAST(${c} AS BLOB)), 0)`).join(' + ');
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
