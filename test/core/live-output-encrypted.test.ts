import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { sqliteStorage } from '../../src/index';
import { openRawSqlite } from '../helpers/raw-sqlite';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { liveOutputSuite } from './live-output-suite';

// The writing side through the encrypting store (SQLite underneath): every case reads its parts back
// decrypted, and the file holds none of them in clear.
const db = tempSqlitePath();
const encryption = { keys: { k1: Buffer.alloc(32, 7) }, activeKeyId: 'k1' };
liveOutputSuite('SQLite, encrypted', () => sqliteStorage({ path: db.file }), undefined, true, { encryption });

describe('live output at rest, encrypted', () => {
  after(() => db.remove());
  it('no part is stored in clear', () => {
    const raw = openRawSqlite(db.file);
    try {
      const rows = raw.prepare(`SELECT data FROM waypoint_events WHERE kind = 'part'`).all() as { data: string }[];
      assert.ok(rows.length > 100, `parts were written (${rows.length})`);
      for (const row of rows) assert.doesNotMatch(row.data, /thinking|inside|"i":/);
    } finally {
      raw.close();
    }
  });
});
