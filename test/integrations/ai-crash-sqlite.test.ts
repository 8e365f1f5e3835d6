import { tempSqlitePath } from '../helpers/sqlite-temp';
import { aiCrashSuite } from './ai-crash-suite';

aiCrashSuite('SQLite', async () => {
  const { file, remove } = tempSqlitePath();
  return { spec: { kind: 'sqlite', file }, dispose: async () => remove() };
});
