import type { ArchiveSink, WriteOnlyArchiveSink } from './archive-sink';

/** AES-256-GCM keys by id; `activeKeyId` encrypts new payloads, every listed key decrypts. */
export interface EncryptionOptions {
  /** 32-byte keys, as Buffers or base64 strings, by key id. Keep retired keys here to read old rows. */
  keys: Record<string, Buffer | string>;
  activeKeyId: string;
}

export type { ArchiveBatch, ArchiveEntry, ArchiveKind, ArchiveSink, WriteOnlyArchiveSink } from './archive-sink';

/** Retention settings. */
export interface RetentionOptions {
  /** Checkpoints kept as individual rows per run; older ones are folded into a base snapshot. Default 10. */
  keepLast?: number;
  /**
   * Where folded and pruned rows are archived before deletion, and restored from. Default: none (folded
   * rows are dropped). A write-only sink of earlier releases is still accepted, without restore.
   */
  archive?: ArchiveSink | WriteOnlyArchiveSink;
  /** Fold automatically every this many steps of a running run (0 = only when asked). Default 0. */
  compactEvery?: number;
}

/** Limits of a run's live output stream (`ctx.emit`, docs/live-output.md). */
export interface LiveOutputOptions {
  /** Largest part `ctx.emit` accepts, in bytes of serialized JSON (UTF-8). Default 64 KiB. */
  maxPartBytes?: number;
  /** Events a run's stream may hold before `ctx.emit` refuses more parts (retractions and statuses are always written). Default 100,000. */
  maxEventsPerRun?: number;
}

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
  /**
   * Refuse (`UNDECLARED_STATE`) inputs, step outputs and fork patches that set properties the pipeline's
   * state class does not declare, for pipelines that do not set `@Pipeline({ strictState })` themselves.
   * Pipelines without a state class have nothing to check. Default false.
   */
  strictState?: boolean;
  /** Seal step rows with HMAC-SHA-256 under this key instead of a plain SHA-256 (tamper-evident). */
  hmacKey?: string | Buffer;
  /** On a corrupted row: 'fail' (default) refuses to load; 'fallback' resumes from the last valid checkpoint, re-running the steps after it. */
  onCorruption?: 'fail' | 'fallback';
  /** Encrypt payloads at rest with AES-256-GCM (key ids allow rotation). */
  encryption?: EncryptionOptions;
  /** Fold old checkpoints into a base snapshot (keep the last N), archiving what is folded. */
  retention?: RetentionOptions;
  /** Largest payload `waypoint.signal()` accepts, in bytes of serialized JSON (UTF-8). Default 256 KiB. */
  maxSignalPayloadBytes?: number;
  /**
   * When a step's row must be committed. 'sync' (default): before the next step starts. 'async': the next
   * step starts while the row is written (at most 8 rows in flight); side effects, durable calls, waits,
   * sleeps, child runs, a pause and the run's end still wait for every row before them. A crash loses at
   * most the rows in flight: those steps run again on resume. See docs/durability-modes.md.
   */
  durability?: 'sync' | 'async';
  /** Limits of the runs' live output streams (`ctx.emit`): part size and events per run. */
  liveOutput?: LiveOutputOptions;
}
