import type { CheckpointRow, WriteRow } from './records';

/** A row as the SQLite and PostgreSQL drivers return it (same column names on both). */
export type Row = Record<string, unknown>;

/** Buffer view of bytes without copying (better-sqlite3 binds Buffers as BLOBs). */
export function toBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A SELECTed checkpoint row as a record. */
export function toCheckpointRow(r: Row): CheckpointRow {
  return {
    threadId: r.thread_id as string,
    checkpointNs: r.checkpoint_ns as string,
    checkpointId: r.checkpoint_id as string,
    parentCheckpointId: (r.parent_checkpoint_id as string | null) ?? null,
    checkpointType: r.checkpoint_type as string,
    checkpoint: r.checkpoint as Buffer,
    metadataType: r.metadata_type as string,
    metadata: r.metadata as Buffer,
    channels: r.channels as string,
    sha256: r.sha256 as string,
  };
}

export function toWriteRow(r: Row): WriteRow {
  return {
    threadId: r.thread_id as string,
    checkpointNs: r.checkpoint_ns as string,
    checkpointId: r.checkpoint_id as string,
    taskId: r.task_id as string,
    idx: Number(r.idx),
    channel: r.channel as string,
    type: r.type as string,
    data: r.data as Buffer,
    taskPath: r.task_path as string,
    sha256: r.sha256 as string,
  };
}
