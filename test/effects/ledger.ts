import { Pool } from 'pg';
import type { EntityManager } from 'typeorm';
import BetterSqlite3 from 'better-sqlite3';

/**
 * A table of the application's own, next to the checkpoints in the same database: what transactional
 * side effects write in the tests. It deliberately has no unique key on the operation, so a second
 * application of one effect shows up as a second row instead of a constraint error. The test reads it on
 * a connection of its own, never inside a transaction of the store.
 */
export interface LedgerRow {
  run_id: string;
  op_key: string;
  item: string;
  amount: number;
}

export interface LedgerDb {
  dialect: 'sqlite' | 'postgres';
  /** Quoted, qualified name of the ledger table. */
  table: string;
  /** Quoted, qualified name of the balances table (one row per account, updated in place). */
  balances: string;
  /** Runs SQL on the test's own connection (autocommit). */
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
  close(): Promise<void>;
}

/** Where the ledger tables are, for code that only writes through a transaction's EntityManager. */
export type LedgerTables = Pick<LedgerDb, 'dialect' | 'table' | 'balances'>;

/** The ledger's table names in a PostgreSQL schema, or in the SQLite file. */
export function ledgerTables(dialect: 'sqlite' | 'postgres', schema?: string): LedgerTables {
  const qualify = (name: string) => (dialect === 'postgres' && schema ? `"${schema}"."${name}"` : `"${name}"`);
  return { dialect, table: qualify('ledger'), balances: qualify('balances') };
}

/** `$n` on PostgreSQL, `?` on SQLite. */
function placeholders(db: Pick<LedgerDb, 'dialect'>, count: number): string {
  return Array.from({ length: count }, (_, i) => (db.dialect === 'postgres' ? `$${i + 1}` : '?')).join(', ');
}

/** Opens the ledger of a PostgreSQL schema (created with the tables if absent). */
export async function postgresLedger(url: string, schema: string): Promise<LedgerDb> {
  const pool = new Pool({ connectionString: url, max: 2 });
  const db: LedgerDb = {
    ...ledgerTables('postgres', schema),
    query: async <T>(sql: string, params: unknown[] = []) => (await pool.query(sql, params)).rows as T[],
    close: () => pool.end(),
  };
  await db.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  await db.query(`CREATE TABLE IF NOT EXISTS ${db.table} (id bigserial PRIMARY KEY, run_id text NOT NULL, op_key text NOT NULL, item text NOT NULL, amount integer NOT NULL)`);
  await db.query(`CREATE TABLE IF NOT EXISTS ${db.balances} (account text PRIMARY KEY, total integer NOT NULL)`);
  return db;
}

interface SqliteHandle {
  exec(sql: string): void;
  prepare(sql: string): { all(...params: unknown[]): unknown[]; run(...params: unknown[]): unknown };
  pragma(sql: string): unknown;
  close(): void;
}

/** Opens the ledger in a SQLite file (created with the tables if absent), on a connection of its own. */
export function sqliteLedger(path: string): LedgerDb {
  // better-sqlite3 ships no types; this is the slice used here.
  const Database = BetterSqlite3 as new (file: string) => SqliteHandle;
  const handle = new Database(path);
  handle.pragma('journal_mode = WAL');
  handle.pragma('busy_timeout = 5000');
  handle.exec('CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, op_key TEXT NOT NULL, item TEXT NOT NULL, amount INTEGER NOT NULL)');
  handle.exec('CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, total INTEGER NOT NULL)');
  return {
    ...ledgerTables('sqlite'),
    query: <T>(sql: string, params: unknown[] = []) => {
      const stmt = handle.prepare(sql);
      return Promise.resolve((/^\s*select/i.test(sql) ? stmt.all(...params) : (stmt.run(...params), [])) as T[]);
    },
    close: () => Promise.resolve(handle.close()),
  };
}

/**
 * Inside a transactional side effect: books `amount` for `item` and adds it to the account's balance,
 * through the transaction's EntityManager.
 */
export async function book(db: LedgerTables, manager: EntityManager, row: LedgerRow, account = 'main'): Promise<void> {
  await manager.query(`INSERT INTO ${db.table} (run_id, op_key, item, amount) VALUES (${placeholders(db, 4)})`, [row.run_id, row.op_key, row.item, row.amount]);
  const [a, b] = db.dialect === 'postgres' ? ['$1', '$2'] : ['?', '?'];
  await manager.query(`INSERT INTO ${db.balances} AS b (account, total) VALUES (${a}, ${b}) ON CONFLICT (account) DO UPDATE SET total = b.total + excluded.total`, [
    account,
    row.amount,
  ]);
}

/** The ledger rows of a run, in insertion order. */
export async function ledgerRows(db: LedgerDb, runId: string): Promise<LedgerRow[]> {
  const rows = await db.query<LedgerRow>(`SELECT run_id, op_key, item, amount FROM ${db.table} WHERE run_id = ${placeholders(db, 1)} ORDER BY id`, [runId]);
  return rows.map((r) => ({ ...r, amount: Number(r.amount) }));
}

/** The balance of an account (0 when it has none). */
export async function balance(db: LedgerDb, account = 'main'): Promise<number> {
  const [row] = await db.query<{ total: number }>(`SELECT total FROM ${db.balances} WHERE account = ${placeholders(db, 1)}`, [account]);
  return row ? Number(row.total) : 0;
}
