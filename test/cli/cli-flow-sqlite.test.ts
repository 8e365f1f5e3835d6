import { join } from 'node:path';
import { defineCliFlowSuite } from './cli-flow-suite';

defineCliFlowSuite('SQLite', (dir) => Promise.resolve({ storeUrl: `sqlite:${join(dir, 'flow.db')}`, dispose: async () => {} }));
