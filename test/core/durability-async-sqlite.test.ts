import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { durabilityAsyncSuite } from './durability-async-suite';

const db = tempSqlitePath();
durabilityAsyncSuite(
  'SQLite',
  () => sqliteStorage({ path: db.file }),
  () => Promise.resolve(db.remove()),
);
