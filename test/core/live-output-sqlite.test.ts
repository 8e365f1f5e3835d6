import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { liveOutputSuite } from './live-output-suite';

const db = tempSqlitePath();
liveOutputSuite(
  'SQLite',
  () => sqliteStorage({ path: db.file }),
  () => Promise.resolve(db.remove()),
  true,
);
