import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { rowsAreTruthSuite } from './rows-are-truth-suite';

const db = tempSqlitePath();
rowsAreTruthSuite(
  'SQLite',
  () => sqliteStorage({ path: db.file }),
  () => Promise.resolve(db.remove()),
);
