import type { SerializerProtocol } from '@langchain/langgraph-checkpoint';
import type { EncryptionOptions } from '../../storage/encrypting-store';
import { type CheckpointLocation, LangGraphCheckpointCorruptedError } from './errors';
import { PayloadCipher, PayloadOpenError } from '../../storage/payload-cipher';
import { type BlobRow, type CheckpointRow, type WriteRow, SEALED_PREFIX, blobAddress, checkpointDigest, writeDigest } from './records';

/** A serialized payload as stored: its (possibly `sealed:`) type and bytes. */
export interface StoredPayload {
  type: string;
  data: Uint8Array;
}

/**
 * Turns LangGraph values into stored payloads and back: the saver's serializer (`serde`), then optional
 * AES-256-GCM sealing bound to the record, and the integrity checks of every record read. One place for
 * all backends, so a backend only ever moves bytes.
 *
 * @example
 * const codec = new PayloadCodec(new JsonPlusSerializer());
 * const stored = await codec.encode({ a: 1 }, codec.blobAad('thread-1'));
 */
export class PayloadCodec {
  private readonly cipher: PayloadCipher | null;

  constructor(
    private readonly serde: SerializerProtocol,
    encryption?: EncryptionOptions,
  ) {
    this.cipher = encryption ? new PayloadCipher(encryption) : null;
  }

  get encrypted(): boolean {
    return this.cipher !== null;
  }

  async encode(value: unknown, aad: string): Promise<StoredPayload> {
    const [type, data] = await this.serde.dumpsTyped(value);
    if (!this.cipher) return { type, data };
    return { type: `${SEALED_PREFIX}${type}`, data: this.cipher.seal(data, aad) };
  }

  /** Opens (when sealed) and deserializes a payload; a failure names the record as corrupted. */
  async decode(payload: StoredPayload, aad: string, where: CheckpointLocation, what: string): Promise<unknown> {
    let { type, data } = payload;
    if (type.startsWith(SEALED_PREFIX)) {
      if (!this.cipher) throw new LangGraphCheckpointCorruptedError(where, what, "it is encrypted but the saver has no 'encryption' keys configured");
      try {
        data = this.cipher.open(data, aad);
      } catch (err) {
        if (err instanceof PayloadOpenError) throw new LangGraphCheckpointCorruptedError(where, what, err.message);
        throw err;
      }
      type = type.slice(SEALED_PREFIX.length);
    }
    try {
      return await this.serde.loadsTyped(type, data);
    } catch (err) {
      throw new LangGraphCheckpointCorruptedError(where, what, `it does not deserialize (${err instanceof Error ? err.message : String(err)})`);
    }
  }

  /** Throws when the row's SHA-256 does not match its content. */
  verifyCheckpoint(row: CheckpointRow): void {
    if (checkpointDigest(row) !== row.sha256) {
      throw new LangGraphCheckpointCorruptedError(row, 'checkpoint', 'its SHA-256 does not match the stored row');
    }
  }

  /** Throws when a referenced blob is missing or its content does not match its address. */
  verifyBlob(where: CheckpointLocation, channel: string, address: string, blob: BlobRow | undefined): BlobRow {
    if (!blob) throw new LangGraphCheckpointCorruptedError(where, `value of channel '${channel}'`, `the blob ${address} it references is missing`);
    if (blobAddress(blob.type, blob.data) !== address) {
      throw new LangGraphCheckpointCorruptedError(where, `value of channel '${channel}'`, `blob ${address} does not match its SHA-256`);
    }
    return blob;
  }

  verifyWrite(row: WriteRow): void {
    if (writeDigest(row) !== row.sha256) {
      throw new LangGraphCheckpointCorruptedError(row, `pending write ${row.taskId}#${row.idx}`, 'its SHA-256 does not match the stored row');
    }
  }

  // Additional authenticated data: a sealed payload opens only on the record it was written for.
  checkpointAad(where: CheckpointLocation, field: 'checkpoint' | 'metadata'): string {
    return JSON.stringify(['lg', field, where.threadId, where.checkpointNs, where.checkpointId]);
  }
  blobAad(threadId: string): string {
    return JSON.stringify(['lg', 'blob', threadId]);
  }
  writeAad(where: CheckpointLocation, taskId: string, idx: number): string {
    return JSON.stringify(['lg', 'write', where.threadId, where.checkpointNs, where.checkpointId, taskId, idx]);
  }
}
