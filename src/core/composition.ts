import type { Container, ContainerModule } from 'inversify';
import type { CheckpointStore } from '../contract/checkpoint-store';
import type { EncryptionOptions } from '../contract/options';
import { queueFleet } from '../queue/fleet';
import { EncryptingCheckpointStore } from '../storage/encrypting-store';
import { sqliteStorage } from '../storage/modules';
import { FLEET } from './fleet-port';

/**
 * The composition root: the one file of the runtime that names concrete parts (the default SQLite store,
 * the encrypting store, the queue's fleet). `Waypoint.create` calls it; everything else in src/core works
 * against the contract (src/contract) and the ports it owns (`fleet-port.ts`), and the layer check
 * (.dependency-cruiser.cjs) allows these imports here only.
 */

/** The store module loaded when the caller's modules bind no `TOKENS.CheckpointStore`. */
export function defaultStorage(): ContainerModule {
  return sqliteStorage();
}

/** The store the runtime uses: `inner`, sealed with AES-256-GCM when `encryption` is given. */
export function storeWith(inner: CheckpointStore, encryption: EncryptionOptions | undefined): CheckpointStore {
  return encryption ? new EncryptingCheckpointStore(inner, encryption) : inner;
}

/** Binds the queue's fleet unless the caller bound their own. */
export function bindDefaultFleet(container: Container): void {
  if (!container.isBound(FLEET)) container.bind(FLEET).toConstantValue(queueFleet);
}
