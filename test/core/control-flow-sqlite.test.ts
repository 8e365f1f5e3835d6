import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { controlFlowSuite } from './control-flow-suite';

const db = tempSqlitePath();
controlFlowSuite(
  'SQLite',
  () => sqliteStorage({ path: db.file }),
  () => Promise.resolve(db.remove()),
);
