import type { ChannelVersions, Checkpoint } from '@langchain/langgraph-checkpoint';
import type { CheckpointWrite } from './backend';
import { type CheckpointLocation, LangGraphCheckpointCorruptedError, LangGraphParentMissingError } from './errors';
import type { PayloadCodec, StoredPayload } from './payload-codec';
import { type BlobRow, type ChannelRefs, type ChannelVersion, blobAddress, checkpointDigest, decodeChannelRefs, encodeChannelRefs } from './records';

/** A channel whose value changed in this checkpoint, encoded as the blob that will hold it. */
export interface ChangedChannel {
  name: string;
  version: ChannelVersion;
  blob: BlobRow;
}

/**
 * Encodes the value of every channel named in `newVersions` that has a value (a channel updated to empty
 * has none: it is absent from the checkpoint). Each becomes a blob addressed by its SHA-256.
 */
export async function encodeChangedChannels(codec: PayloadCodec, threadId: string, values: Record<string, unknown>, newVersions: ChannelVersions): Promise<ChangedChannel[]> {
  const changed: ChangedChannel[] = [];
  for (const [name, version] of Object.entries(newVersions)) {
    if (!Object.hasOwn(values, name)) continue;
    const payload = await codec.encode(values[name], codec.blobAad(threadId));
    changed.push({ name, version, blob: { address: blobAddress(payload.type, payload.data), type: payload.type, data: payload.data } });
  }
  return changed;
}

/**
 * The write of one checkpoint. Channels that did not change are carried over from the parent checkpoint
 * (the one named in the config LangGraph passes to `put`) by reference, when the parent holds them at the
 * same version; a channel the parent does not hold is not stored (LangGraph only leaves out channels whose
 * value it did not change). If the parent is gone while channels need carrying, nothing is written.
 */
export function buildCheckpointWrite(input: {
  where: CheckpointLocation;
  parentCheckpointId: string | null;
  checkpoint: Checkpoint;
  newVersions: ChannelVersions;
  body: StoredPayload;
  meta: StoredPayload;
  changed: ChangedChannel[];
}): CheckpointWrite {
  const { where, parentCheckpointId, checkpoint, newVersions, body, meta, changed } = input;
  const carried = Object.keys(checkpoint.channel_values ?? {}).filter((name) => !Object.hasOwn(newVersions, name));
  return {
    ...where,
    parentCheckpointId,
    build(parentChannels) {
      if (carried.length > 0 && parentCheckpointId !== null && parentChannels === null) {
        throw new LangGraphParentMissingError(where, parentCheckpointId, carried);
      }
      const parentRefs =
        parentChannels === null ? new Map<string, readonly [ChannelVersion, string]>() : parseParentRefs(parentChannels, { ...where, checkpointId: parentCheckpointId ?? '' });
      const refs: ChannelRefs = new Map();
      const blobs = new Map<string, BlobRow>();
      for (const c of changed) {
        refs.set(c.name, [c.version, c.blob.address]);
        blobs.set(c.blob.address, c.blob);
      }
      const inherited = new Set<string>();
      for (const name of carried) {
        const ref = parentRefs.get(name);
        if (!ref || String(ref[0]) !== String(checkpoint.channel_versions?.[name])) continue;
        refs.set(name, ref);
        if (!blobs.has(ref[1])) inherited.add(ref[1]);
      }
      const row = {
        ...where,
        parentCheckpointId,
        checkpointType: body.type,
        checkpoint: body.data,
        metadataType: meta.type,
        metadata: meta.data,
        channels: encodeChannelRefs(refs),
      };
      return { row: { ...row, sha256: checkpointDigest(row) }, blobs: [...blobs.values()], inherited: [...inherited] };
    },
  };
}

function parseParentRefs(text: string, parent: CheckpointLocation): ChannelRefs {
  try {
    return decodeChannelRefs(text);
  } catch (err) {
    throw new LangGraphCheckpointCorruptedError(parent, 'checkpoint', `its channel references do not parse (${(err as Error).message})`);
  }
}
