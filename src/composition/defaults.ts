import type { Container, ContainerModule } from 'inversify';
import type { CheckpointStore } from '../contract/checkpoint-store';
import type { EncryptionOptions } from '../contract/options';
import { queueFleet } from '../queue/fleet';
import { EncryptingCheckpointStore } from '../storage/encrypting-store';
import { sqliteStorage } from '../storage/modules';
import { FLEET } from '../core/run/fleet-port';

/**
 * The composition root's defaults: the parts `Waypoint.create` (./waypoint.ts) names when the caller's
 * modules leave them unbound (the default SQLite store, the encrypting store, the queue's fleet). This floor
 * (src/composition) sits above the runtime: src/core works against the contract (src/contract) and the
 * ports it owns (`core/run/fleet-port.ts`) and never imports a concrete store or the queue
 * (.dependency-cruiser.cjs enforces it).
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
