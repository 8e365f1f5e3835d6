import { join } from 'node:path';
import { flipped } from './cli-harness';
import { defineCliSuite } from './cli-suite';
import BetterSqlite3 from 'better-sqlite3';

// better-sqlite3 ships no types: the slice used here.
type Statement = { get(...params: unknown[]): unknown; run(...params: unknown[]): unknown };
const Database = BetterSqlite3 as new (path: string) => { prepare(sql: string): Statement; close(): void };

// One SQLite file in the suite's temp dir; the flip goes through better-sqlite3 directly.
defineCliSuite({
  name: 'SQLite',
  open(dir) {
    const path = join(dir, 'nested', 'waypoint.db');
    return Promise.resolve({
      storeUrl: `sqlite:${path}`,
      workerEnv: { WAYPOINT_DB: path, WAYPOINT_PG_URL: undefined, WAYPOINT_PG_SCHEMA: undefined },
      flipByte(runId, sequence) {
        const sqlite = new Database(path);
        try {
          const row = sqlite.prepare('SELECT output FROM waypoint_steps WHERE run_id = ? AND sequence = ?').get(runId, sequence) as { output: string };
          sqlite.prepare('UPDATE waypoint_steps SET output = ? WHERE run_id = ? AND sequence = ?').run(flipped(row.output), runId, sequence);
        } finally {
          sqlite.close();
        }
        return Promise.resolve();
      },
      dispose: async () => {},
    });
  },
});
