import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { defineRunStreamSuite } from './run-stream-suite';

/** waypoint.stream on SQLite: one temp file, opened by a store object per Waypoint and by the child reader. */
defineRunStreamSuite(() => {
  const { file, remove } = tempSqlitePath();
  return Promise.resolve({ name: 'sqlite', modules: () => [sqliteStorage({ path: file })], child: { kind: 'sqlite', file }, dispose: () => Promise.resolve(remove()) });
});
