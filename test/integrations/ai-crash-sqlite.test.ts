import { tempSqlitePath } from '../helpers/sqlite-temp';
import { aiCrashSuite } from './ai-crash-suite';

aiCrashSuite('SQLite', () => {
  const { file, remove } = tempSqlitePath();
  return Promise.resolve({ spec: { kind: 'sqlite', file }, dispose: () => Promise.resolve(remove()) });
});
