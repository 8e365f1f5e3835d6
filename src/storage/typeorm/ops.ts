import type { DataSource } from 'typeorm';
import type { CheckpointStore } from '../checkpoint-store';

/**
 * What a dialect provides to `TypeOrmCheckpointStore`: the data methods of the contract, run on the native
 * driver under the DataSource, plus the DataSource itself. The store adds the lifecycle and the error
 * wrapping, so each dialect file holds only its queries.
 */
export type DataOps = Omit<CheckpointStore, 'backend' | 'init' | 'close'>;

export interface DialectOps extends DataOps {
  readonly dataSource: DataSource;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
