import { ContainerModule } from 'inversify';
import { MemoryCheckpointStore, TOKENS } from '../../src/index';
import { rowsAreTruthSuite } from './rows-are-truth-suite';

// One in-memory store that both Waypoints of the suite open.
const store = new MemoryCheckpointStore();
rowsAreTruthSuite(
  'the memory store',
  () =>
    new ContainerModule(({ bind }) => {
      bind(TOKENS.CheckpointStore).toConstantValue(store);
    }),
);
