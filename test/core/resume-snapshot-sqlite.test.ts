import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { resumeSnapshotSuite } from './resume-snapshot-suite';

const db = tempSqlitePath();
resumeSnapshotSuite(
  'SQLite',
  () => sqliteStorage({ path: db.file }),
  () => Promise.resolve(db.remove()),
);
