import { WaypointError } from '../../contract/errors';

/**
 * Group commit: step appends of different runs that are ready at the same time share one statement and
 * one commit, so one WAL flush acknowledges several runs' steps.
 *
 * Nothing waits on a timer. An append is sent at once while fewer than `maxInFlight` batches are in
 * flight; otherwise it queues, and when a batch returns, everything queued by then leaves together (up
 * to `maxBatch`). A lone run therefore pays no extra latency, and under load batches grow by themselves
 * to the number of runs that became ready during one commit. Every append is acknowledged only after
 * the statement that carries it has committed.
 */

export interface GroupCommitOptions {
  /**
   * Batches in flight at once (each on its own pooled connection). Low values batch more; the default
   * of 2 keeps two runs from ever waiting on each other's commit. Default 2.
   */
  maxInFlight?: number;
  /** Most appends in one statement. Default 64. */
  maxBatch?: number;
}

export interface ResolvedGroupCommit {
  maxInFlight: number;
  maxBatch: number;
}

/** Defaults and checks for {@link GroupCommitOptions}; `false` turns batching off (every append alone). */
export function resolveGroupCommit(options: GroupCommitOptions | false | undefined): ResolvedGroupCommit | null {
  if (options === false) return null;
  const maxInFlight = options?.maxInFlight ?? 2;
  const maxBatch = options?.maxBatch ?? 64;
  for (const [name, value] of [
    ['maxInFlight', maxInFlight],
    ['maxBatch', maxBatch],
  ] as const) {
    if (!Number.isInteger(value) || value < 1) {
      throw new WaypointError('INVALID_STORE_OPTIONS', `Invalid checkpoint store option: groupCommit.${name} must be a positive integer, got ${String(value)}.`);
    }
  }
  return { maxInFlight, maxBatch };
}

/** Counters of a store's group commit (see `TypeOrmCheckpointStore.groupCommitStats`). */
export interface GroupCommitStats {
  /** Batches sent: each is one statement and one commit. */
  statements: number;
  /** Appends those batches carried. */
  appends: number;
  /** Appends waiting now for a batch slot. */
  queued: number;
}

/**
 * What a batch writer returns for each item, in order: null when it committed, or the error that item
 * gets (a `LeaseLostError` for a stale fence).
 */
export type BatchResults = ReadonlyArray<Error | null>;

interface Pending<T> {
  item: T;
  key: string;
  resolve(): void;
  reject(error: unknown): void;
}

/**
 * Queues items and hands them to `write` in batches (see the module comment). Items with the same `key`
 * (the run id) never share a batch: each run's appends stay in order and one statement never carries two
 * appends of one run.
 *
 * @example
 * const batcher = new CommitBatcher<StepAppend>((a) => a.step.runId, (batch) => ops.appendMany(batch), { maxInFlight: 2, maxBatch: 64 });
 * await batcher.submit(append); // resolves once the statement carrying it has committed
 */
export class CommitBatcher<T> {
  private queue: Pending<T>[] = [];
  private inFlight = 0;
  private written = { statements: 0, appends: 0 };

  constructor(
    private readonly keyOf: (item: T) => string,
    private readonly write: (batch: T[]) => Promise<BatchResults>,
    private readonly options: ResolvedGroupCommit,
  ) {}

  /** Resolves after the item's statement committed; rejects with its own error (or the batch's). */
  submit(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ item, key: this.keyOf(item), resolve, reject });
      this.pump();
    });
  }

  /** Batches written and items they carried since the start; appends / statements is the batching factor. */
  get stats(): GroupCommitStats {
    return { ...this.written, queued: this.queue.length };
  }

  private pump(): void {
    while (this.inFlight < this.options.maxInFlight && this.queue.length > 0) {
      const batch = this.take();
      this.inFlight++;
      void this.flush(batch);
    }
  }

  /** Up to maxBatch queued items, oldest first, at most one per key; the rest keep their order. */
  private take(): Pending<T>[] {
    // A lone item (a lone run, the usual case) is the whole batch: no key set, no second list.
    if (this.queue.length === 1) {
      const batch = this.queue;
      this.queue = [];
      return batch;
    }
    const batch: Pending<T>[] = [];
    const rest: Pending<T>[] = [];
    const keys = new Set<string>();
    for (const pending of this.queue) {
      if (batch.length < this.options.maxBatch && !keys.has(pending.key)) {
        keys.add(pending.key);
        batch.push(pending);
      } else {
        rest.push(pending);
      }
    }
    this.queue = rest;
    return batch;
  }

  private async flush(batch: Pending<T>[]): Promise<void> {
    this.written.statements++;
    this.written.appends += batch.length;
    try {
      const results = await this.write(batch.map((p) => p.item));
      batch.forEach((pending, i) => {
        const error = results[i];
        if (error) pending.reject(error);
        else pending.resolve();
      });
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    } finally {
      this.inFlight--;
      this.pump();
    }
  }
}
