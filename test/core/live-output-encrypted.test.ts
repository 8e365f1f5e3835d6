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
      // One row per append (migration V7): its body is a header (kinds, steps, lengths) and the parts' data.
      const rows = raw.prepare(`SELECT count, body FROM waypoint_stream_batches`).all() as { count: number; body: string }[];
      const events = rows.reduce((sum, row) => sum + row.count, 0);
      assert.ok(events > 100, `events were written (${events})`);
      for (const row of rows) assert.doesNotMatch(row.body, /thinking|inside|"i":/);
    } finally {
      raw.close();
    }
  });
});
