import { MemoryCheckpointStore } from '../../src/storage/memory-store';
import { runStoreConformance } from '../../src/testing';

// The reference implementation passes the same suite as every backend.
runStoreConformance({
  name: 'memory',
  makeStore: () => {
    const store = new MemoryCheckpointStore();
    return Promise.resolve({ store, cleanup: () => store.close() });
  },
  processLocal: true,
});
