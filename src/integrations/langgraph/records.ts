import { createHash } from 'node:crypto';

/**
 * The storage-neutral records of the LangGraph saver, shared by every backend, and the integrity
 * digests over them. A backend stores and returns these as they are; it never parses a payload.
 */

/** A channel version as LangGraph hands it over (numbers by default, strings for some savers' schemes). */
export type ChannelVersion = number | string;

/** Per channel: the version the checkpoint holds and the address (SHA-256) of the blob with its value. */
export type ChannelRefs = Map<string, readonly [ChannelVersion, string]>;

/** One checkpoint: everything but the channel values, which are referenced by address in `channels`. */
export interface CheckpointRow {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  parentCheckpointId: string | null;
  /** Serializer type of `checkpoint` (`json`, ...), prefixed `sealed:` when the bytes are encrypted. */
  checkpointType: string;
  /** The checkpoint without its channel values, as the saver's serializer wrote it. */
  checkpoint: Uint8Array;
  metadataType: string;
  metadata: Uint8Array;
  /** Canonical JSON of the channel references: `{"channel":[version,"address"],...}`, keys sorted. */
  channels: string;
  /** SHA-256 over every other field (see {@link checkpointDigest}), checked on every load. */
  sha256: string;
}

/** One channel value, stored once per thread under the SHA-256 of its stored form (content addressing). */
export interface BlobRow {
  address: string;
  type: string;
  data: Uint8Array;
}

/** One pending write of a task against a checkpoint. */
export interface WriteRow {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
  taskId: string;
  /** Position of the write in its task's batch; negative for LangGraph's special writes (errors, interrupts). */
  idx: number;
  channel: string;
  type: string;
  data: Uint8Array;
  /** Path of the task that wrote it ('' when unknown): part of the replay order LangGraph requires. */
  taskPath: string;
  sha256: string;
}

/** A thread known to the saver, with the time of its last checkpoint. */
export interface ThreadInfo {
  threadId: string;
  updatedAt: Date;
}

/** What `prune` removed. */
export interface PruneResult {
  checkpoints: number;
  writes: number;
  blobs: number;
}

/** Marks a stored type whose bytes are an encryption envelope. */
export const SEALED_PREFIX = 'sealed:';

type Field = string | Uint8Array | number | null;

/**
 * SHA-256 over a list of fields, each written as a kind byte, a 4-byte length and its bytes, so no two
 * different field lists can produce the same input ("ab","c" differs from "a","bc").
 *
 * @example
 * digest(['thread-1', '', null]) !== digest(['thread-1', null, ''])
 */
export function digest(fields: readonly Field[]): string {
  const hash = createHash('sha256');
  const header = Buffer.alloc(5);
  for (const field of fields) {
    let kind: number;
    let bytes: Uint8Array;
    if (field === null) [kind, bytes] = [0, new Uint8Array(0)];
    else if (typeof field === 'string') [kind, bytes] = [1, Buffer.from(field, 'utf8')];
    else if (typeof field === 'number') [kind, bytes] = [2, Buffer.from(String(field), 'utf8')];
    else [kind, bytes] = [3, field];
    header.writeUInt8(kind, 0);
    header.writeUInt32BE(bytes.byteLength, 1);
    hash.update(header);
    hash.update(bytes);
  }
  return hash.digest('hex');
}

/** The integrity digest of a checkpoint row: binds the payloads to their thread, namespace, id and parent. */
export function checkpointDigest(row: Omit<CheckpointRow, 'sha256'>): string {
  return digest([
    'lg-checkpoint',
    row.threadId,
    row.checkpointNs,
    row.checkpointId,
    row.parentCheckpointId,
    row.checkpointType,
    row.checkpoint,
    row.metadataType,
    row.metadata,
    row.channels,
  ]);
}

/** The address of a blob: SHA-256 of its stored type and bytes. Equal values share one blob. */
export function blobAddress(type: string, data: Uint8Array): string {
  return digest(['lg-blob', type, data]);
}

export function writeDigest(row: Omit<WriteRow, 'sha256'>): string {
  return digest(['lg-write', row.threadId, row.checkpointNs, row.checkpointId, row.taskId, row.idx, row.channel, row.type, row.data, row.taskPath]);
}

/** Canonical JSON of channel references (keys sorted), so equal references hash equally. */
export function encodeChannelRefs(refs: ChannelRefs): string {
  const out = Object.create(null) as Record<string, readonly [ChannelVersion, string]>;
  for (const name of [...refs.keys()].sort()) out[name] = refs.get(name)!;
  return JSON.stringify(out);
}

/** Parses `channels`; throws on anything that is not a `{name: [version, address]}` object. */
export function decodeChannelRefs(text: string): ChannelRefs {
  const parsed: unknown = JSON.parse(text);
  // plain Error: the clause the caller wraps into LangGraphCheckpointCorruptedError (CHECKPOINT_CORRUPTED).
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('channel references are not an object');
  const refs: ChannelRefs = new Map();
  for (const [name, ref] of Object.entries(parsed as Record<string, unknown>)) {
    if (!Array.isArray(ref) || ref.length !== 2 || typeof ref[1] !== 'string' || (typeof ref[0] !== 'number' && typeof ref[0] !== 'string')) {
      // plain Error: the clause the caller wraps into LangGraphCheckpointCorruptedError (CHECKPOINT_CORRUPTED).
      throw new Error(`channel reference '${name}' is malformed`);
    }
    refs.set(name, [ref[0], ref[1]]);
  }
  return refs;
}

/** Identifiers end up in keys and index members separated by NUL, and PostgreSQL text cannot hold NUL. */
export function hasNul(value: string): boolean {
  return value.includes('\u0000');
}
