import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { httpSuite } from './http-suite';

httpSuite('SQLite', () => {
  const { file, remove } = tempSqlitePath();
  return Promise.resolve({ modules: () => [sqliteStorage({ path: file })], dispose: () => Promise.resolve(remove()) });
});
