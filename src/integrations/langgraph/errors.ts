import { CheckpointCorruptedError, WaypointError, reasonOf } from '../../contract/errors';

/** Where a stored LangGraph record lives: thread, namespace and checkpoint id. */
export interface CheckpointLocation {
  threadId: string;
  checkpointNs: string;
  checkpointId: string;
}

/**
 * A stored LangGraph checkpoint, channel blob or pending write fails its integrity check (SHA-256
 * mismatch, or AES-GCM authentication failure when encryption is on). Code `CHECKPOINT_CORRUPTED`, like
 * every corrupted Waypoint checkpoint; `sequence` is -1 because LangGraph checkpoints are addressed by id.
 *
 * @example
 * try { await graph.invoke(null, config); }
 * catch (err) { if (err instanceof LangGraphCheckpointCorruptedError) restoreThread(err.threadId); }
 */
export class LangGraphCheckpointCorruptedError extends CheckpointCorruptedError {
  readonly threadId: string;
  readonly checkpointNs: string;
  readonly checkpointId: string;

  constructor(where: CheckpointLocation, what: string, why: string) {
    super(where.threadId, -1, why);
    this.threadId = where.threadId;
    this.checkpointNs = where.checkpointNs;
    this.checkpointId = where.checkpointId;
    // The base message speaks of run sequences; a LangGraph checkpoint is named by thread, namespace and id.
    this.message =
      `LangGraph ${what} of thread '${where.threadId}' (namespace '${where.checkpointNs}', checkpoint '${where.checkpointId}') is corrupted: ${reasonOf(why)}. ` +
      `Restore the rows from a backup, or resume the thread from an earlier checkpoint (pass its checkpoint_id in the config).`;
  }
}

/** The RunnableConfig given to the saver lacks what the operation needs (thread_id, checkpoint_id) or holds a bad value. */
export class LangGraphConfigError extends WaypointError {
  constructor(operation: string, problem: string) {
    super(
      'LANGGRAPH_INVALID_CONFIG',
      `WaypointCheckpointSaver.${operation}: ${reasonOf(problem)}. Pass it in the config, e.g. graph.invoke(input, { configurable: { thread_id: 'my-thread' } }).`,
    );
  }
}

/**
 * A checkpoint was written on top of a parent checkpoint that no longer exists (pruned by retention or
 * deleted while the write was in flight), so the channels it did not change cannot be carried over.
 */
export class LangGraphParentMissingError extends WaypointError {
  readonly threadId: string;
  readonly parentCheckpointId: string;
  constructor(where: CheckpointLocation, parentCheckpointId: string, channels: string[]) {
    super(
      'LANGGRAPH_PARENT_MISSING',
      `Checkpoint '${where.checkpointId}' of thread '${where.threadId}' (namespace '${where.checkpointNs}') names parent '${parentCheckpointId}', ` +
        `which no longer exists (pruned or deleted), so its unchanged channels (${channels.join(', ')}) cannot be carried over. ` +
        `Nothing was written. Resume the thread from its latest checkpoint, or keep more checkpoints (retention.keepLast).`,
      { runId: where.threadId },
    );
    this.threadId = where.threadId;
    this.parentCheckpointId = parentCheckpointId;
  }
}
