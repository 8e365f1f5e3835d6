import * as path from 'node:path';
import type { DataSourceOptions } from 'typeorm';
import { WaypointError } from '../../contract/errors';
import { type GroupCommitOptions, type ResolvedGroupCommit, resolveGroupCommit } from './group-commit';

/**
 * Your TypeORM entities (classes or schemas), registered with the store's DataSource so a transactional
 * side effect can use them through `currentTransaction()` (`manager.insert(Order, ...)`). Metadata only:
 * the store never creates or changes their tables.
 */
export type StoreEntities = NonNullable<DataSourceOptions['entities']>;

/** SQLite `synchronous` pragma. FULL (the default) fsyncs every commit, so a step is durable before the next starts. */
export type SqliteSynchronous = 'FULL' | 'NORMAL';

/**
 * Embedded SQLite database file (better-sqlite3), in WAL mode.
 *
 * @example
 * new TypeOrmCheckpointStore({ type: 'sqlite', path: '/var/lib/app/waypoint.db' });
 */
export interface SqliteStoreOptions {
  type: 'sqlite';
  /** Database file; its parent directory is created. Default `./.waypoint/waypoint.db` under `process.cwd()`. */
  path?: string;
  /**
   * FULL: a committed step survives power loss. NORMAL: it survives a process crash but the last
   * commits may be lost on power loss or an OS crash (WAL is fsynced only at checkpoints).
   */
  synchronous?: SqliteSynchronous;
  /** How long a write waits for another process's write lock before failing, in ms. Default 5000. */
  busyTimeoutMs?: number;
  /** Prefix of every table name (default `waypoint_`), to share one file with other tables. */
  tablePrefix?: string;
  /** Your entities, for transactional side effects (see `StoreEntities`). */
  entities?: StoreEntities;
}

/**
 * PostgreSQL through the `pg` pool TypeORM creates.
 *
 * @example
 * new TypeOrmCheckpointStore({ type: 'postgres', url: process.env.DATABASE_URL!, schema: 'waypoint' });
 */
export interface PostgresStoreOptions {
  type: 'postgres';
  /** Connection string, e.g. `postgres://user:pass@host:5432/db`. */
  url: string;
  /** Schema holding every table (created if absent). Default: the connection's search_path. */
  schema?: string;
  /** Maximum pooled connections. Default 10 (pg's default). */
  poolSize?: number;
  /**
   * Group commit of concurrent runs' step appends (one statement and one commit for the appends that are
   * ready together; see `GroupCommitOptions`). On by default; `false` sends every append alone.
   */
  groupCommit?: GroupCommitOptions | false;
  tablePrefix?: string;
  /** Your entities, for transactional side effects (see `StoreEntities`). */
  entities?: StoreEntities;
}

/** Options of {@link TypeOrmCheckpointStore}: `type` picks the dialect. */
export type TypeOrmStoreOptions = SqliteStoreOptions | PostgresStoreOptions;

export interface ResolvedSqliteOptions {
  type: 'sqlite';
  path: string;
  synchronous: SqliteSynchronous;
  busyTimeoutMs: number;
  tablePrefix: string;
  entities?: StoreEntities;
}

export interface ResolvedPostgresOptions {
  type: 'postgres';
  url: string;
  schema: string | undefined;
  poolSize: number;
  /** null: group commit off. */
  groupCommit: ResolvedGroupCommit | null;
  tablePrefix: string;
  entities?: StoreEntities;
}

export type ResolvedStoreOptions = ResolvedSqliteOptions | ResolvedPostgresOptions;

export const DEFAULT_TABLE_PREFIX = 'waypoint_';

/** The embedded default: next to the application, not in a temp dir that the OS may clear. */
export function defaultSqlitePath(): string {
  return path.join(process.cwd(), '.waypoint', 'waypoint.db');
}

// Identifiers are interpolated into SQL text (they cannot be bind parameters), so only plain ones are
// accepted. A prefix stays short so prefix + the longest index name fits PostgreSQL's 63-byte limit.
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
const PREFIX = /^[A-Za-z_][A-Za-z0-9_]{0,31}$/;

/** Fills defaults and rejects unsafe identifiers up front, when the module is configured, not at first write. */
export function resolveOptions(options: TypeOrmStoreOptions): ResolvedStoreOptions {
  const tablePrefix = options.tablePrefix ?? DEFAULT_TABLE_PREFIX;
  if (tablePrefix !== '' && !PREFIX.test(tablePrefix)) throw invalid(`tablePrefix '${tablePrefix}' (at most 32 characters)`);
  if (options.type === 'sqlite') {
    const synchronous = options.synchronous ?? 'FULL';
    if (synchronous !== 'FULL' && synchronous !== 'NORMAL') throw invalid(`synchronous '${String(synchronous)}' (use 'FULL' or 'NORMAL')`);
    return {
      type: 'sqlite',
      path: path.resolve(options.path ?? defaultSqlitePath()),
      synchronous,
      busyTimeoutMs: options.busyTimeoutMs ?? 5000,
      tablePrefix,
      ...(options.entities ? { entities: options.entities } : {}),
    };
  }
  if (options.type !== 'postgres') throw invalid(`type '${String((options as { type: unknown }).type)}' (use 'sqlite' or 'postgres')`);
  if (!options.url) throw invalid(`url (a postgres:// connection string is required)`);
  if (options.schema !== undefined && !IDENTIFIER.test(options.schema)) throw invalid(`schema '${options.schema}'`);
  return {
    type: 'postgres',
    url: options.url,
    schema: options.schema,
    poolSize: options.poolSize ?? 10,
    groupCommit: resolveGroupCommit(options.groupCommit),
    tablePrefix,
    ...(options.entities ? { entities: options.entities } : {}),
  };
}

function invalid(what: string): WaypointError {
  return new WaypointError(
    'INVALID_STORE_OPTIONS',
    `Invalid checkpoint store option: ${what}. Identifiers must be letters, digits and underscores, starting with a letter or underscore.`,
  );
}
