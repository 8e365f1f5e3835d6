import { ContainerModule } from 'inversify';
import { TOKENS } from '../core/tokens';
import { MemoryCheckpointStore } from './memory-store';

/**
 * In-memory checkpoint store (tests, experiments): nothing survives the process.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
 */
export function memoryStorage(): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind(TOKENS.CheckpointStore).toConstantValue(new MemoryCheckpointStore());
  });
}
