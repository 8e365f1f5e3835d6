import { memoryStorage } from '../../src/index';
import { defineProgressSuite } from './run-progress-suite';

// The CLI runs in another process and cannot see a memory store: RunInfo, resume() and the page are compared.
defineProgressSuite('memory', () => {
  const module = memoryStorage();
  return Promise.resolve({ storage: () => module, storeUrl: null, dispose: () => Promise.resolve() });
});
