import { isDeepStrictEqual } from 'node:util';
import {
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type Checkpoint,
  type SerializerProtocol,
  TASKS,
  compareWritesSortKeys,
  maxChannelVersion,
  writesSortKey,
} from '@langchain/langgraph-checkpoint';
import { defineData } from '../../core/state/value-decoder';
import type { SaverBackend } from './backend';
import { LangGraphCheckpointCorruptedError } from './errors';
import type { PayloadCodec } from './payload-codec';
import { type BlobRow, type ChannelRefs, type ChannelVersion, type CheckpointRow, type WriteRow, decodeChannelRefs } from './records';

/**
 * Turns stored rows into LangGraph checkpoint tuples: checks each row's SHA-256, loads the blobs and
 * pending writes of a batch of rows in one query each per thread, checks their hashes, decrypts and
 * deserializes. Checkpoints older than format v4 get their pending sends migrated as LangGraph expects.
 */
export class TupleReader {
  constructor(
    private readonly backend: SaverBackend,
    private readonly codec: PayloadCodec,
    private readonly serde: SerializerProtocol,
    private readonly firstVersion: () => ChannelVersion,
  ) {}

  /** The rows whose metadata has every key of `filter` deeply equal to its value. */
  async matching(rows: CheckpointRow[], filter: Record<string, unknown>): Promise<CheckpointRow[]> {
    const out: CheckpointRow[] = [];
    for (const row of rows) {
      this.codec.verifyCheckpoint(row);
      const metadata = (await this.metadataOf(row)) as Record<string, unknown>;
      if (Object.entries(filter).every(([key, value]) => isDeepStrictEqual(metadata[key], value))) out.push(row);
    }
    return out;
  }

  async tuples(rows: CheckpointRow[]): Promise<CheckpointTuple[]> {
    const byThread = new Map<string, CheckpointRow[]>();
    for (const row of rows) {
      this.codec.verifyCheckpoint(row);
      byThread.set(row.threadId, [...(byThread.get(row.threadId) ?? []), row]);
    }
    const loaded = new Map<CheckpointRow, CheckpointTuple>();
    await Promise.all(
      [...byThread].map(async ([threadId, threadRows]) => {
        const refs = new Map(threadRows.map((row) => [row, this.refsOf(row)] as const));
        const addresses = [...new Set([...refs.values()].flatMap((r) => [...r.values()].map((ref) => ref[1])))];
        const keys = threadRows.map((r) => ({ checkpointNs: r.checkpointNs, checkpointId: r.checkpointId }));
        const [blobs, writes] = await Promise.all([this.backend.getBlobs(threadId, addresses), this.backend.getWrites(threadId, keys)]);
        for (const row of threadRows) loaded.set(row, await this.tuple(row, refs.get(row)!, blobs, writes));
      }),
    );
    return rows.map((row) => loaded.get(row)!);
  }

  private async tuple(row: CheckpointRow, refs: ChannelRefs, blobs: Map<string, BlobRow>, writes: WriteRow[]): Promise<CheckpointTuple> {
    const aad = this.codec.checkpointAad(row, 'checkpoint');
    const stored = (await this.codec.decode({ type: row.checkpointType, data: row.checkpoint }, aad, row, 'checkpoint')) as Omit<Checkpoint, 'channel_values'>;
    const channelValues: Record<string, unknown> = {};
    for (const [name, [, address]] of refs) {
      const blob = this.codec.verifyBlob(row, name, address, blobs.get(address));
      defineData(channelValues, name, await this.codec.decode(blob, this.codec.blobAad(row.threadId), row, `value of channel '${name}'`));
    }
    const checkpoint: Checkpoint = { ...stored, channel_values: channelValues };
    const own = writes.filter((w) => w.checkpointNs === row.checkpointNs && w.checkpointId === row.checkpointId);
    const tuple: CheckpointTuple = {
      config: { configurable: { thread_id: row.threadId, checkpoint_ns: row.checkpointNs, checkpoint_id: row.checkpointId } },
      checkpoint,
      metadata: (await this.metadataOf(row)) as CheckpointMetadata,
      pendingWrites: await this.pendingWrites(own),
    };
    if (row.parentCheckpointId !== null) {
      tuple.parentConfig = { configurable: { thread_id: row.threadId, checkpoint_ns: row.checkpointNs, checkpoint_id: row.parentCheckpointId } };
      if (checkpoint.v < 4) await this.migratePendingSends(checkpoint, row);
    }
    return tuple;
  }

  /**
   * Before format v4, sends were pending writes to TASKS on the parent; LangGraph now expects them as the
   * TASKS channel of the child (as every LangGraph saver migrates them on read).
   */
  private async migratePendingSends(checkpoint: Checkpoint, row: CheckpointRow): Promise<void> {
    const parentWrites = await this.backend.getWrites(row.threadId, [{ checkpointNs: row.checkpointNs, checkpointId: row.parentCheckpointId! }]);
    const sends = (await this.pendingWrites(parentWrites.filter((w) => w.channel === TASKS))).map(([, , value]) => value);
    defineData(checkpoint.channel_values, TASKS, sends);
    const versions = Object.values(checkpoint.channel_versions);
    defineData(checkpoint.channel_versions, TASKS, versions.length > 0 ? maxChannelVersion(...versions) : this.firstVersion());
  }

  /** Verified, decoded writes in the order LangGraph replays them: (task path, task id, idx). */
  private async pendingWrites(rows: WriteRow[]): Promise<CheckpointPendingWrite[]> {
    const sorted = [...rows].sort((a, b) => compareWritesSortKeys(writesSortKey(a.taskPath, a.taskId, a.idx), writesSortKey(b.taskPath, b.taskId, b.idx)));
    const out: CheckpointPendingWrite[] = [];
    for (const w of sorted) {
      this.codec.verifyWrite(w);
      const value = await this.codec.decode(w, this.codec.writeAad(w, w.taskId, w.idx), w, `pending write ${w.taskId}#${w.idx}`);
      out.push([w.taskId, w.channel, value]);
    }
    return out;
  }

  private metadataOf(row: CheckpointRow): Promise<unknown> {
    return this.codec.decode({ type: row.metadataType, data: row.metadata }, this.codec.checkpointAad(row, 'metadata'), row, 'metadata');
  }

  private refsOf(row: CheckpointRow): ChannelRefs {
    try {
      return decodeChannelRefs(row.channels);
    } catch (err) {
      throw new LangGraphCheckpointCorruptedError(row, 'checkpoint', `its channel references do not parse (${(err as Error).message})`);
    }
  }
}
