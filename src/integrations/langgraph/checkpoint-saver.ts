import type { RunnableConfig } from '@langchain/core/runnables';
import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
  type SerializerProtocol,
  WRITES_IDX_MAP,
  getCheckpointId,
} from '@langchain/langgraph-checkpoint';
import { WaypointError, storeFailure } from '../../contract/errors';
import { NoopTelemetry } from '../../core/ports/telemetry';
import { type Telemetry } from '../../contract/telemetry';
import type { EncryptionOptions } from '../../storage/encrypting-store';
import type { TypeOrmCheckpointStore } from '../../storage/sql/typeorm-store';
import type { CheckpointQuery, SaverBackend } from './backend';
import { type CheckpointLocation, LangGraphCheckpointCorruptedError, LangGraphConfigError } from './errors';
import { PayloadCodec } from './payload-codec';
import { type PruneResult, type ThreadInfo, type WriteRow, hasNul, writeDigest } from './records';
import { type LangGraphRedisOptions, RedisSaverBackend } from './redis-backend';
import { StoreSaverBackend } from './store-backend';
import { buildCheckpointWrite, encodeChangedChannels } from './checkpoint-write';
import { TupleReader } from './tuple-reader';

/** Keep the newest `keepLast` checkpoints of each namespace of a thread; prune every `pruneEvery` puts. */
export interface LangGraphRetention {
  keepLast: number;
  /** Puts to a thread (in this process) between two automatic prunes of it. Default 10. */
  pruneEvery?: number;
}

/** Options of {@link WaypointCheckpointSaver}: exactly one of `store` (SQLite / PostgreSQL) or `redis`. */
export interface WaypointCheckpointSaverOptions {
  /** The Waypoint SQL store whose database holds the saver's tables (the saver creates them on first use). */
  store?: TypeOrmCheckpointStore;
  /** Redis connection and key prefix. */
  redis?: LangGraphRedisOptions;
  /** LangGraph serializer. Default: LangGraph's JsonPlusSerializer. */
  serde?: SerializerProtocol;
  /** AES-256-GCM at rest for checkpoints, metadata, channel values and writes (the format of Waypoint's encryption). */
  encryption?: EncryptionOptions;
  /** Automatic retention; `prune()` can also be called directly. */
  retention?: LangGraphRetention;
  /** Receives a span per saver operation (`waypoint.langgraph.*`). */
  telemetry?: Telemetry;
}

const PAGE_SIZE = 100;
const PUT_ATTEMPTS = 3;

/**
 * A LangGraph.js checkpointer on Waypoint's storage: SQLite or PostgreSQL through a Waypoint
 * `TypeOrmCheckpointStore` (its tables created beside the store's on first use), or Redis.
 *
 * - Channel values are stored per thread under the SHA-256 of their stored form: a checkpoint only writes
 *   the channels that changed (`newVersions`) and references the parent's blobs for the rest, so
 *   unchanged channels are never rewritten and two forks can never overwrite each other's values.
 * - Every record carries a SHA-256 checked on load: a mismatch raises `LangGraphCheckpointCorruptedError`
 *   (code `CHECKPOINT_CORRUPTED`) naming thread, namespace and checkpoint, never a silent fresh start.
 * - Optional AES-256-GCM encryption (`encryption`), retention (`retention`, `prune`), spans (`telemetry`).
 * - Store failures raise `StoreUnavailableError` (code `STORE_UNAVAILABLE`) when the store cannot be
 *   reached, `StoreRejectedError` (`STORE_REJECTED`) when it refused the operation.
 *
 * Metadata filters of `list` compare each given key by deep equality, after decoding (so they also work
 * with encryption).
 *
 * @example
 * const store = new TypeOrmCheckpointStore({ type: 'sqlite', path: './.waypoint/waypoint.db' });
 * const checkpointer = new WaypointCheckpointSaver({ store, retention: { keepLast: 50 } });
 * const graph = workflow.compile({ checkpointer });
 * await graph.invoke(input, { configurable: { thread_id: 'ticket-42' } });
 */
export class WaypointCheckpointSaver extends BaseCheckpointSaver {
  private readonly backend: SaverBackend;
  private readonly codec: PayloadCodec;
  private readonly reader: TupleReader;
  private readonly telemetry: Telemetry;
  private readonly retention: Required<LangGraphRetention> | null;
  private readonly putsSincePrune = new Map<string, number>();

  constructor(options: WaypointCheckpointSaverOptions) {
    super(options.serde);
    if ((options.store === undefined) === (options.redis === undefined)) {
      throw new WaypointError('INVALID_OPTIONS', "WaypointCheckpointSaver needs exactly one of 'store' (a TypeOrmCheckpointStore, for SQLite or PostgreSQL) or 'redis'.");
    }
    if (options.store !== undefined && !isSqlStore(options.store)) {
      throw new WaypointError(
        'INVALID_OPTIONS',
        "WaypointCheckpointSaver: 'store' must be a TypeOrmCheckpointStore (SQLite or PostgreSQL), not a wrapper; for Redis pass { redis: { url, keyPrefix } }, and for encryption the saver's own 'encryption' option.",
      );
    }
    if (options.retention) validateKeepLast(options.retention.keepLast);
    const pruneEvery = options.retention?.pruneEvery ?? 10;
    if (!Number.isInteger(pruneEvery) || pruneEvery < 1) throw new WaypointError('INVALID_OPTIONS', `retention.pruneEvery must be a whole number >= 1 (got ${pruneEvery}).`);
    this.retention = options.retention ? { keepLast: options.retention.keepLast, pruneEvery } : null;
    this.backend = options.store ? new StoreSaverBackend(options.store) : new RedisSaverBackend(options.redis);
    this.codec = new PayloadCodec(this.serde, options.encryption);
    this.reader = new TupleReader(this.backend, this.codec, this.serde, () => this.getNextVersion(undefined));
    this.telemetry = options.telemetry ?? new NoopTelemetry();
  }

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const raw: unknown = config.configurable?.thread_id;
    if (raw === undefined || raw === null) return undefined;
    const threadId = identifier('getTuple', 'thread_id', raw);
    const checkpointNs = identifier('getTuple', 'checkpoint_ns', config.configurable?.checkpoint_ns ?? '');
    const id = getCheckpointId(config);
    const checkpointId = id ? identifier('getTuple', 'checkpoint_id', id) : undefined;
    return this.call('getTuple', threadId, () =>
      this.telemetry.span('waypoint.langgraph.get_tuple', { 'waypoint.thread_id': threadId, 'waypoint.backend': this.backend.name }, async () => {
        const row = await this.backend.getCheckpoint(threadId, checkpointNs, checkpointId);
        return row ? (await this.reader.tuples([row]))[0] : undefined;
      }),
    );
  }

  async *list(config: RunnableConfig, options: CheckpointListOptions = {}): AsyncGenerator<CheckpointTuple> {
    const c = config.configurable ?? {};
    const query: Omit<CheckpointQuery, 'limit'> = {
      threadId: c.thread_id === undefined || c.thread_id === null ? undefined : identifier('list', 'thread_id', c.thread_id),
      checkpointNs: c.checkpoint_ns === undefined ? undefined : identifier('list', 'checkpoint_ns', c.checkpoint_ns),
      checkpointId: c.checkpoint_id ? identifier('list', 'checkpoint_id', c.checkpoint_id) : undefined,
      beforeId: options.before?.configurable?.checkpoint_id ? identifier('list', 'before.checkpoint_id', options.before.configurable.checkpoint_id) : undefined,
    };
    let remaining = options.limit ?? Number.POSITIVE_INFINITY;
    const filter = options.filter && Object.keys(options.filter).length > 0 ? options.filter : undefined;
    let after: CheckpointQuery['after'];
    while (remaining > 0) {
      // Without a filter every row counts, so the page never needs to be larger than what is left.
      const limit = filter ? PAGE_SIZE : Math.min(PAGE_SIZE, remaining);
      const rows = await this.call('list', query.threadId, () => this.backend.listCheckpoints({ ...query, after, limit }));
      if (rows.length === 0) return;
      const last = rows[rows.length - 1];
      after = { checkpointId: last.checkpointId, threadId: last.threadId, checkpointNs: last.checkpointNs };
      const selected = filter ? await this.call('list', query.threadId, () => this.reader.matching(rows, filter)) : rows;
      const tuples = await this.call('list', query.threadId, () => this.reader.tuples(selected.slice(0, remaining)));
      for (const tuple of tuples) {
        yield tuple;
        remaining -= 1;
      }
      if (rows.length < limit) return;
    }
  }

  async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    if (!config.configurable) throw new LangGraphConfigError('put', "the config has no 'configurable' object (thread_id is required)");
    const threadId = identifier('put', 'thread_id', required('put', 'thread_id', config.configurable.thread_id));
    const checkpointNs = identifier('put', 'checkpoint_ns', config.configurable.checkpoint_ns ?? '');
    const checkpointId = identifier('put', 'checkpoint.id', checkpoint.id);
    const parent: unknown = config.configurable.checkpoint_id;
    const parentCheckpointId = parent ? identifier('put', 'checkpoint_id', parent) : null;
    const where: CheckpointLocation = { threadId, checkpointNs, checkpointId };
    await this.call('put', threadId, async () => {
      const { channel_values: values, ...rest } = checkpoint;
      const changed = await encodeChangedChannels(this.codec, threadId, values ?? {}, newVersions);
      const body = await this.codec.encode(rest, this.codec.checkpointAad(where, 'checkpoint'));
      const meta = await this.codec.encode(metadata, this.codec.checkpointAad(where, 'metadata'));
      const write = buildCheckpointWrite({ where, parentCheckpointId, checkpoint, newVersions, body, meta, changed });
      const attributes = {
        'waypoint.thread_id': threadId,
        'waypoint.backend': this.backend.name,
        'waypoint.langgraph.channels_written': changed.length,
        'waypoint.langgraph.bytes': body.data.byteLength + meta.data.byteLength + changed.reduce((n, c) => n + c.blob.data.byteLength, 0),
      };
      await this.telemetry.span('waypoint.langgraph.put', attributes, async () => {
        for (let attempt = 1; ; attempt++) {
          if ((await this.backend.putCheckpoint(write)) === 'written') return;
          // An inherited blob vanished between reading the parent and writing (a concurrent prune): read again.
          if (attempt >= PUT_ATTEMPTS) {
            throw new LangGraphCheckpointCorruptedError(
              { threadId, checkpointNs, checkpointId: parentCheckpointId ?? checkpointId },
              'parent checkpoint',
              'channel values it references are missing from storage',
            );
          }
        }
      });
    });
    await this.maybePrune(threadId);
    return { configurable: { thread_id: threadId, checkpoint_ns: checkpointNs, checkpoint_id: checkpointId } };
  }

  async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    const c = config.configurable;
    const threadId = identifier('putWrites', 'thread_id', required('putWrites', 'thread_id', c?.thread_id));
    const checkpointId = identifier('putWrites', 'checkpoint_id', required('putWrites', 'checkpoint_id', c?.checkpoint_id));
    const checkpointNs = identifier('putWrites', 'checkpoint_ns', c?.checkpoint_ns ?? '');
    const task = identifier('putWrites', 'taskId', taskId);
    const path = identifier('putWrites', 'taskPath', taskPath ?? '');
    for (const [channel] of writes) identifier('putWrites', 'channel', channel);
    const where: CheckpointLocation = { threadId, checkpointNs, checkpointId };
    // Special writes (errors, interrupts, ...) have fixed negative indexes and replace their previous
    // value; a regular write keeps the first value stored for its index.
    const byIdx = new Map<number, PendingWrite>();
    writes.forEach((w, i) => {
      const idx = w[0] in WRITES_IDX_MAP ? WRITES_IDX_MAP[w[0]] : i;
      if (idx < 0 || !byIdx.has(idx)) byIdx.set(idx, w);
    });
    await this.call('putWrites', threadId, () =>
      this.telemetry.span('waypoint.langgraph.put_writes', { 'waypoint.thread_id': threadId, 'waypoint.writes': byIdx.size }, async () => {
        const rows: WriteRow[] = [];
        for (const [idx, [channel, value]] of byIdx) {
          const payload = await this.codec.encode(value, this.codec.writeAad(where, task, idx));
          const row = { ...where, taskId: task, idx, channel, type: payload.type, data: payload.data, taskPath: path };
          rows.push({ ...row, sha256: writeDigest(row) });
        }
        await this.backend.putWrites(rows);
      }),
    );
  }

  async deleteThread(threadId: string): Promise<void> {
    const id = identifier('deleteThread', 'threadId', threadId);
    this.putsSincePrune.delete(id);
    await this.call('deleteThread', id, () => this.backend.deleteThread(id));
  }

  /**
   * Keeps the newest `keepLast` checkpoints of each namespace of a thread and removes the rest with
   * their pending writes and every channel value no remaining checkpoint references.
   *
   * @example
   * const removed = await saver.prune('ticket-42', { keepLast: 20 }); // { checkpoints, writes, blobs }
   */
  async prune(threadId: string, options: { keepLast: number }): Promise<PruneResult> {
    const id = identifier('prune', 'threadId', threadId);
    validateKeepLast(options.keepLast);
    this.putsSincePrune.delete(id);
    return this.call('prune', id, () => this.backend.prune(id, options.keepLast));
  }

  /**
   * Threads by the time of their last checkpoint, oldest first: e.g. to delete those idle for a month.
   *
   * @example
   * for (const t of await saver.listThreads({ updatedBefore: new Date(Date.now() - 30 * 86_400_000) })) await saver.deleteThread(t.threadId);
   */
  async listThreads(options: { updatedBefore?: Date; limit?: number } = {}): Promise<ThreadInfo[]> {
    return this.call('listThreads', undefined, () => this.backend.listThreads({ updatedBefore: options.updatedBefore, limit: options.limit ?? 1000 }));
  }

  /** Closes the saver's own Redis client. A Waypoint store passed in `store` stays open (it is the caller's). */
  async close(): Promise<void> {
    await this.backend.close();
  }

  private async maybePrune(threadId: string): Promise<void> {
    if (!this.retention) return;
    const puts = (this.putsSincePrune.get(threadId) ?? 0) + 1;
    if (puts < this.retention.pruneEvery) {
      this.putsSincePrune.set(threadId, puts);
      return;
    }
    // The checkpoint is committed; a failing prune still surfaces, rather than retention silently stopping.
    await this.prune(threadId, { keepLast: this.retention.keepLast });
  }

  /** Typed errors pass through; a driver error becomes STORE_UNAVAILABLE or STORE_REJECTED (storeFailure). */
  private async call<T>(operation: string, threadId: string | undefined, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof WaypointError) throw err;
      throw storeFailure(this.backend.name, `LangGraph ${operation}${threadId === undefined ? '' : ` of thread '${threadId}'`}`, err);
    }
  }
}

function required(operation: string, field: string, value: unknown): unknown {
  if (value === undefined || value === null || value === '') throw new LangGraphConfigError(operation, `'configurable.${field}' is missing`);
  return value;
}

/** Thread ids may be numbers in user code; every identifier is stored as a string without NUL. */
function identifier(operation: string, field: string, value: unknown): string {
  if (typeof value !== 'string' && typeof value !== 'number') throw new LangGraphConfigError(operation, `'${field}' must be a string (got ${typeof value})`);
  const text = String(value);
  if (hasNul(text)) throw new LangGraphConfigError(operation, `'${field}' must not contain a NUL character`);
  return text;
}

function isSqlStore(store: unknown): store is TypeOrmCheckpointStore {
  const s = store as { backend?: unknown; init?: unknown };
  return (s.backend === 'sqlite' || s.backend === 'postgres') && typeof s.init === 'function' && 'dataSource' in (store as object);
}

function validateKeepLast(keepLast: number): void {
  if (!Number.isInteger(keepLast) || keepLast < 1) {
    throw new WaypointError('INVALID_OPTIONS', `retention.keepLast must be a whole number >= 1 (got ${keepLast}): the newest checkpoint of a thread is always kept.`);
  }
}
