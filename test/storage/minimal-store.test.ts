import { runStoreConformance } from '../../src/testing';
import { MinimalCheckpointStore } from './minimal-store';

// A store that writes only the primitives passes the same suite as every backend: the derived operations
// (loadRun, appendRun, cancelRun) written once in CheckpointStore are enough.
runStoreConformance({
  name: 'minimal (primitives only)',
  makeStore: async () => {
    const store = new MinimalCheckpointStore();
    return { store, cleanup: () => store.close() };
  },
  processLocal: true,
});
