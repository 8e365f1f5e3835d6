import type { EncryptionOptions } from '../storage/encrypting-store';
import type { RetentionOptions } from './retention';

/** Runtime options, bound as `TOKENS.Options`. Every field has a production default. */
export interface WaypointOptions {
  /** Lease owner id of this process. Default: `host:pid:random`. */
  workerId?: string;
  /** How long a lease is valid without renewal. Default 30 s. */
  leaseTtlMs?: number;
  /** Renewal period of a held lease. Default leaseTtlMs / 3. */
  heartbeatMs?: number;
  /** How long `run` / `resume` waits for another executor's lease before `RunLockedError`. Default 0. */
  waitForLockMs?: number;
  /** Validate the shared state against the state class after every step, not only on input and load. Default true. */
  validateEveryStep?: boolean;
  /** Seal step rows with HMAC-SHA-256 under this key instead of a plain SHA-256 (tamper-evident). */
  hmacKey?: string | Buffer;
  /** On a corrupted row: 'fail' (default) refuses to load; 'fallback' resumes from the last valid checkpoint, re-running the steps after it. */
  onCorruption?: 'fail' | 'fallback';
  /** Encrypt payloads at rest with AES-256-GCM (key ids allow rotation). */
  encryption?: EncryptionOptions;
  /** Fold old checkpoints into a base snapshot (keep the last N), archiving what is folded. */
  retention?: RetentionOptions;
}

export type ResolvedOptions = Required<Omit<WaypointOptions, 'hmacKey' | 'encryption' | 'retention'>> & { integrity: { hmacKey?: Buffer }; encrypted: boolean };
