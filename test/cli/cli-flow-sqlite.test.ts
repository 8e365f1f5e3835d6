import { join } from 'node:path';
import { defineCliFlowSuite } from './cli-flow-suite';

defineCliFlowSuite('SQLite', async (dir) => ({ storeUrl: `sqlite:${join(dir, 'flow.db')}`, dispose: async () => {} }));
