import 'reflect-metadata';
import { after, describe } from 'node:test';
import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { kitOnStore } from './store-suite';

// The same pipelines on the user's own store: every simulated process opens its own connection to the file.
describe('crashTest on SQLite', () => {
  const db = tempSqlitePath();
  after(() => db.remove());
  kitOnStore(sqliteStorage({ path: db.file, tablePrefix: 'kit_', synchronous: 'NORMAL' }), 'o-2');
});
