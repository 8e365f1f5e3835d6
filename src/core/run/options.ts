import type { WaypointOptions } from '../../contract/options';

export type ResolvedOptions = Required<Omit<WaypointOptions, 'hmacKey' | 'encryption' | 'retention' | 'maxSignalPayloadBytes'>> & {
  integrity: { hmacKey?: Buffer };
  encrypted: boolean;
};
