import type { FleetPort } from '../core/run/fleet-port';
import { closeQueue, enqueue } from './enqueue';
import { startWorker } from './fleet-worker';

/**
 * The queue's implementation of the runtime's fleet port: what `waypoint.enqueue`, `waypoint.worker` and
 * `waypoint.close` call. Bound as `FLEET` by the composition root; rebind it to plug in another fleet.
 */
export const queueFleet: FleetPort = {
  enqueue: (host, pipeline, options) => enqueue(host, pipeline, options),
  worker: (host, options) => startWorker(host, options),
  close: (host) => closeQueue(host),
};
