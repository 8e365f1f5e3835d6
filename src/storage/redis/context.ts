import type { Redis } from 'ioredis';
import { journaledScript, type JournalEntry } from './journal';
import type { RedisKeys } from './keys';
import type { ReplicaScripts } from './replica';
import type { ScriptCommands, ScriptName } from './scripts';

/** What the Redis store's operations (runs.ts, leases.ts, operations.ts, maintenance.ts) work with. */
export interface RedisStoreContext {
  readonly client: Redis & ScriptCommands & ReplicaScripts;
  readonly keys: RedisKeys;
  /** Expiry of a finished run's keys; 0 keeps them. */
  readonly ttlSeconds: number;
  /** A write script, with its journal notice when the store keeps a journal. */
  write(name: ScriptName, entry: JournalEntry, ...args: (string | number)[]): Promise<unknown>;
}

export function redisStoreContext(client: Redis & ScriptCommands & ReplicaScripts, keys: RedisKeys, ttlSeconds: number, journal: string | undefined): RedisStoreContext {
  return {
    client,
    keys,
    ttlSeconds,
    write: (name, entry, ...args) => (journal ? journaledScript(client, journal, name, args, entry) : client[name](...args)),
  };
}
