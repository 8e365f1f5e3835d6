import { MemoryCheckpointStore } from '../../src/storage/memory-store';
import { runConformance } from './conformance';

// The reference implementation passes the same suite as every backend.
runConformance('memory', async () => {
  const store = new MemoryCheckpointStore();
  return { store, cleanup: () => store.close() };
}, { processLocal: true });
