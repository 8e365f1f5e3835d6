import { sqliteStorage } from '../../src/index';
import { openRawSqlite, type RawSqlite } from '../helpers/raw-sqlite';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { defineAlterationSuite, type RawBackend, type RawValue, type Snapshot } from './alterations-suite';

/** The alteration suite on SQLite: rows altered with better-sqlite3 in the store's own file. */
defineAlterationSuite(() => {
  const { file, remove } = tempSqlitePath();
  let db: RawSqlite | undefined;
  const raw = (): RawSqlite => (db ??= openRawSqlite(file));
  const tables = () =>
    raw()
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
      .all()
      .map((r) => String(r.name));
  const backend: RawBackend = {
    name: 'sqlite',
    storeUrl: `sqlite:${file}`,
    modules: () => [sqliteStorage({ path: file })],
    dump(): Snapshot {
      const data: Record<string, Record<string, unknown>[]> = {};
      const lines: string[] = [];
      for (const table of tables()) {
        data[table] = raw().prepare(`SELECT * FROM "${table}"`).all();
        lines.push(...data[table].map((row) => `${table} ${JSON.stringify(row)}`).sort());
      }
      return { text: lines.join('\n'), data };
    },
    restore(snapshot: Snapshot): void {
      const data = snapshot.data as Record<string, Record<string, unknown>[]>;
      raw().transaction(() => {
        for (const table of tables()) {
          raw().prepare(`DELETE FROM "${table}"`).run();
          for (const row of data[table] ?? []) {
            const columns = Object.keys(row);
            raw()
              .prepare(`INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`)
              .run(...columns.map((c) => row[c]));
          }
        }
      })();
    },
    step(runId, sequence) {
      const [row] = raw().prepare('SELECT * FROM waypoint_steps WHERE run_id = ? AND sequence = ?').all(runId, sequence);
      if (!row) throw new Error(`no row ${runId}#${sequence}`);
      return row as Record<string, RawValue>;
    },
    updateStep(runId, sequence, changes) {
      const columns = Object.keys(changes);
      const done = raw()
        .prepare(`UPDATE waypoint_steps SET ${columns.map((c) => `"${c}" = ?`).join(', ')} WHERE run_id = ? AND sequence = ?`)
        .run(...columns.map((c) => changes[c]), runId, sequence);
      if (done.changes !== 1) throw new Error(`no row ${runId}#${sequence} to update`);
    },
    deleteStep(runId, sequence) {
      raw().prepare('DELETE FROM waypoint_steps WHERE run_id = ? AND sequence = ?').run(runId, sequence);
    },
    runField(runId, column) {
      return String(raw().prepare(`SELECT "${column}" AS v FROM waypoint_runs WHERE run_id = ?`).all(runId)[0]?.v);
    },
    updateRun(runId, column, value) {
      raw().prepare(`UPDATE waypoint_runs SET "${column}" = ? WHERE run_id = ?`).run(value, runId);
    },
    dispose() {
      db?.close();
      remove();
    },
  };
  return backend;
});
