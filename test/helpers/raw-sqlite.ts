import BetterSqlite3 from 'better-sqlite3';

/**
 * The plain better-sqlite3 driver, for tests that read and alter a store's file behind Waypoint's back
 * (the package ships no types; this is the slice the tests use).
 */
export interface RawStatement {
  run(...params: unknown[]): { changes: number };
  all(...params: unknown[]): Record<string, unknown>[];
}

export interface RawSqlite {
  prepare(sql: string): RawStatement;
  exec(sql: string): void;
  transaction<A extends unknown[]>(fn: (...args: A) => void): (...args: A) => void;
  close(): void;
}

/** Opens `file` with better-sqlite3 (a second connection next to the store's; WAL allows it). */
export function openRawSqlite(file: string): RawSqlite {
  const Database = BetterSqlite3 as new (file: string) => RawSqlite;
  const db = new Database(file);
  db.exec('PRAGMA busy_timeout = 5000');
  return db;
}
