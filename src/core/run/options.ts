import type { LiveOutputOptions, WaypointOptions } from '../../contract/options';

export type ResolvedOptions = Required<Omit<WaypointOptions, 'hmacKey' | 'encryption' | 'retention' | 'maxSignalPayloadBytes' | 'liveOutput'>> & {
  integrity: { hmacKey?: Buffer };
  encrypted: boolean;
  liveOutput: Required<LiveOutputOptions>;
};
