import type { DataSource } from 'typeorm';
import { pgPoolOf, sqliteHandleOf } from '../../storage/sql/driver-handles';
import { quoteIdent } from '../../storage/sql/sql';
import type { TypeOrmCheckpointStore } from '../../storage/sql/typeorm-store';
import type { CheckpointKey, CheckpointQuery, CheckpointWrite, PutOutcome, SaverBackend } from './backend';
import { PostgresSaverBackend } from './postgres-backend';
import type { BlobRow, CheckpointRow, PruneResult, ThreadInfo, WriteRow } from './records';
import { langGraphTables } from './sql-schema';
import { ensurePostgresTables, ensureSqliteTables } from './sql-setup';
import { type SqliteDatabase, SqliteSaverBackend } from './sqlite-backend';

/**
 * The SQL backend of a Waypoint `TypeOrmCheckpointStore`: initializes the store on first use, creates
 * the LangGraph tables beside the store's if they are not there yet (sql-setup.ts), then runs the queries
 * on the native driver under its DataSource (the `pg` pool, or the better-sqlite3 handle), in tables named
 * after the store's own schema and prefix. A store closed and initialized again gets a new DataSource; the
 * dialect backend is rebuilt for it.
 */
export class StoreSaverBackend implements SaverBackend {
  private bound: { dataSource: DataSource; backend: Promise<SaverBackend> } | null = null;

  constructor(private readonly store: TypeOrmCheckpointStore) {}

  get name(): 'sqlite' | 'postgres' {
    return this.store.backend;
  }

  async putCheckpoint(write: CheckpointWrite): Promise<PutOutcome> {
    return (await this.current()).putCheckpoint(write);
  }
  async getCheckpoint(threadId: string, checkpointNs: string, checkpointId: string | undefined): Promise<CheckpointRow | undefined> {
    return (await this.current()).getCheckpoint(threadId, checkpointNs, checkpointId);
  }
  async listCheckpoints(query: CheckpointQuery): Promise<CheckpointRow[]> {
    return (await this.current()).listCheckpoints(query);
  }
  async getBlobs(threadId: string, addresses: string[]): Promise<Map<string, BlobRow>> {
    return (await this.current()).getBlobs(threadId, addresses);
  }
  async getWrites(threadId: string, checkpoints: CheckpointKey[]): Promise<WriteRow[]> {
    return (await this.current()).getWrites(threadId, checkpoints);
  }
  async putWrites(rows: WriteRow[]): Promise<void> {
    return (await this.current()).putWrites(rows);
  }
  async deleteThread(threadId: string): Promise<void> {
    return (await this.current()).deleteThread(threadId);
  }
  async prune(threadId: string, keepLast: number): Promise<PruneResult> {
    return (await this.current()).prune(threadId, keepLast);
  }
  async listThreads(options: { updatedBefore?: Date; limit: number }): Promise<ThreadInfo[]> {
    return (await this.current()).listThreads(options);
  }
  close(): Promise<void> {
    // The store (and its connection) belongs to the caller.
    this.bound = null;
    return Promise.resolve();
  }

  private async current(): Promise<SaverBackend> {
    await this.store.init();
    const dataSource = this.store.dataSource;
    if (this.bound?.dataSource !== dataSource) {
      const bound = { dataSource, backend: bind(dataSource) };
      this.bound = bound;
      // A failed setup (database unreachable) is tried again by the next call, not remembered.
      bound.backend.catch(() => {
        if (this.bound === bound) this.bound = null;
      });
    }
    return this.bound.backend;
  }
}

async function bind(dataSource: DataSource): Promise<SaverBackend> {
  const options = dataSource.options as { type: string; schema?: string; migrationsTableName?: string };
  const store = { migrations: options.migrationsTableName ?? 'waypoint_migrations', schema: options.type === 'postgres' && options.schema ? quoteIdent(options.schema) : null };
  const tables = langGraphTables(store);
  if (options.type === 'postgres') {
    const pool = pgPoolOf(dataSource);
    await ensurePostgresTables(pool, store);
    return new PostgresSaverBackend(pool, tables);
  }
  const db = sqliteHandleOf<SqliteDatabase>(dataSource);
  await ensureSqliteTables(db, store);
  return new SqliteSaverBackend(db, tables);
}
