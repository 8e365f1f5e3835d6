import { sqliteStorage } from '../../src/index';
import { tempSqlitePath } from '../helpers/sqlite-temp';
import { controlFlowSuite } from './control-flow-suite';

// The whole control-flow suite (parallel, loop, branch, forEach, when, child runs, pauses, failures) with
// every step's row written behind the next step.
const db = tempSqlitePath();
controlFlowSuite(
  'SQLite, durability async',
  () => sqliteStorage({ path: db.file }),
  () => Promise.resolve(db.remove()),
  { durability: 'async' },
);
