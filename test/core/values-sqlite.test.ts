import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { defineValuesSuite } from './values-suite';

/** The stored-values suite on SQLite: one temp file, opened again by every reader. */
defineValuesSuite(async () => {
  const { file, remove } = tempSqlitePath();
  return { name: 'sqlite', modules: () => [sqliteStorage({ path: file })], dispose: async () => remove() };
});
