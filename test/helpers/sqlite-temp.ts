import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';

/**
 * A fresh SQLite path in its own temp directory, one level down so the store must create its parent.
 *
 * @example
 * const { file, remove } = tempSqlitePath(); try { ... } finally { remove(); }
 */
export function tempSqlitePath(): { file: string; remove: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'waypoint-sqlite-'));
  return { file: path.join(dir, 'nested', 'waypoint.db'), remove: () => rmSync(dir, { recursive: true, force: true }) };
}
