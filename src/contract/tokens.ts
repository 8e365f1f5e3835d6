import type { ServiceIdentifier } from 'inversify';
import type { CheckpointStore } from './checkpoint-store';
import type { Clock } from './clock';
import type { Logger } from './logger';
import type { WaypointOptions } from './options';
import type { Telemetry } from './telemetry';

/**
 * Inversify service identifiers of everything the runtime resolves. Rebind one (or load a module that
 * binds it) to swap the implementation.
 *
 * @example
 * container.rebind(TOKENS.CheckpointStore).toConstantValue(myStore);
 */
export const TOKENS = {
  CheckpointStore: Symbol.for('waypoint:CheckpointStore') as ServiceIdentifier<CheckpointStore>,
  Clock: Symbol.for('waypoint:Clock') as ServiceIdentifier<Clock>,
  Logger: Symbol.for('waypoint:Logger') as ServiceIdentifier<Logger>,
  Options: Symbol.for('waypoint:Options') as ServiceIdentifier<WaypointOptions>,
  Telemetry: Symbol.for('waypoint:Telemetry') as ServiceIdentifier<Telemetry>,
} as const;
