import type { CheckpointStore, Fence, RunStatus } from '../../contract/checkpoint-store';
import { supportsStreams, type RunStreamStore, type StreamEvent } from '../../contract/run-stream';
import { describeError, WaypointError } from '../../contract/errors';
import type { Logger } from '../../contract/logger';
import type { LiveOutputOptions } from '../../contract/options';
import { orphanedAttempts } from './stream-tail';

/** Longest a part waits in the buffer before its batch is appended (ms). */
export const STREAM_FLUSH_MS = 25;
/** A batch leaves at once when this many events are buffered. */
export const STREAM_BATCH_EVENTS = 64;
/** Most events one `appendEvents` carries (a buffer that grew while an append was in flight leaves in several). */
const MAX_APPEND = 1_024;

/** The run's live-output limits, resolved (see `LiveOutputOptions`). */
export type StreamLimits = Required<LiveOutputOptions>;

/**
 * `Waypoint.create({ liveOutput })` checked, with the defaults (64 KiB parts, 100,000 events per run).
 *
 * @example
 * resolveStreamLimits({ maxPartBytes: 4096 }); // { maxPartBytes: 4096, maxEventsPerRun: 100_000 }
 */
export function resolveStreamLimits(given: LiveOutputOptions = {}): StreamLimits {
  const limits = { maxPartBytes: given.maxPartBytes ?? 64 * 1024, maxEventsPerRun: given.maxEventsPerRun ?? 100_000 };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value < 1) {
      throw new WaypointError('INVALID_OPTIONS', `liveOutput.${name} must be a positive whole number, got ${String(value)}. Omit it for the default.`);
    }
  }
  return limits;
}

interface Waiter {
  through: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * One execution's writer of its run's output stream (docs/live-output.md): events are numbered as they are
 * pushed (1, 2, ...), buffered, and appended in order, fenced by the run's lease, one append in flight at a
 * time; a batch leaves `STREAM_FLUSH_MS` after its first event or at `STREAM_BATCH_EVENTS` events, or at once
 * when someone waits for it (a step's row, the end of the execution). Pushing never waits for the store.
 * Without a store that keeps streams, everything is a no-op (and `emit` warns once per run).
 */
export class RunStreamWriter {
  /** Events pushed by this execution (the number of the last one). */
  private pushed = 0;
  /** Events handed to the store (appended, being appended, or failed). */
  private sent = 0;
  /** Events whose append has settled. */
  private settled = 0;
  /** The first failed append: every event from `at` on is not known to be stored. */
  private failure: { at: number; error: unknown } | null = null;
  private readonly buffer: StreamEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** A batch is due as soon as nothing is in flight (its delay passed, it is full, or someone waits for it). */
  private due = false;
  private inFlight = false;
  private readonly waiters: Waiter[] = [];
  /** Events in the stream before this execution started (for the per-run limit). */
  private before = 0;
  /** Set by `finish`: later events are dropped. */
  private closed = false;
  private warned = false;
  private readonly store: (CheckpointStore & RunStreamStore) | null;

  constructor(
    store: CheckpointStore,
    private readonly runId: string,
    private readonly fence: Fence,
    private readonly logger: Logger,
    readonly limits: StreamLimits,
    /** Called once when an append is refused because the lease is lost (the execution must stop). */
    private readonly onLeaseLost: (error: WaypointError) => void,
  ) {
    this.store = supportsStreams(store) ? store : null;
  }

  /** False when the store keeps no streams (a user's store without the `RunStreamStore` methods). */
  get enabled(): boolean {
    return this.store !== null;
  }

  /** Events the run's stream holds or will hold once this execution's buffer is written. */
  get length(): number {
    return this.before + this.pushed;
  }

  /**
   * Starts the execution's stream: a resumed run's attempts that died with parts nobody retracted (a crash)
   * are retracted, then `running` is appended. When there was anything to retract the call waits until it
   * is stored, so that no row of this execution can be recorded before it. `recorded` holds the paths of
   * the steps the run has rows for; `fresh` is a run this call created (its stream is empty).
   */
  async open(recorded: ReadonlySet<string>, fresh: boolean): Promise<void> {
    if (this.store === null) return;
    let retracts: StreamEvent[] = [];
    if (!fresh) {
      const tail = await orphanedAttempts(this.store, this.runId, recorded);
      this.before = tail.length;
      retracts = tail.orphans.map(({ step, attempt }): StreamEvent => ({ kind: 'retract', step, attempt }));
    }
    for (const event of retracts) this.push(event);
    this.push({ kind: 'status', status: 'running' });
    if (retracts.length > 0) await this.durable(this.pushed);
  }

  /** Buffers a part (its data already serialized and checked); returns its number. */
  part(step: string, attempt: number, data: string): number {
    return this.push({ kind: 'part', step, attempt, data });
  }

  /** Buffers the retraction of attempt `attempt` of step `step`; returns its number. */
  retract(step: string, attempt: number): number {
    return this.push({ kind: 'retract', step, attempt });
  }

  /** Buffers a status event; returns its number. */
  status(status: RunStatus, detail?: string): number {
    return this.push(detail === undefined ? { kind: 'status', status } : { kind: 'status', status, detail });
  }

  /** Logs, once per execution, that parts are dropped because the store keeps no streams. */
  warnDisabled(step: string): void {
    if (this.warned) return;
    this.warned = true;
    this.logger.warn('ctx.emit ignored: the checkpoint store keeps no run streams', { runId: this.runId, step });
  }

  /**
   * Undefined when every event up to number `through` is stored (nothing to wait for: no promise is made);
   * else a promise that resolves once they are, or rejects with the error of a failed append among them.
   * Anything buffered up to `through` leaves now, without waiting for its delay.
   */
  durable(through: number): Promise<void> | undefined {
    if (through <= this.settled) return this.failure !== null && through >= this.failure.at ? Promise.reject(this.failure.error) : undefined;
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ through, resolve, reject });
      this.kick();
    });
  }

  /**
   * Appends what is buffered, waits for it, and closes the writer (later events are dropped). A failed
   * append is logged, not thrown: the run's rows are already what they are.
   */
  async finish(): Promise<void> {
    if (this.store === null || this.closed) return;
    try {
      await this.durable(this.pushed);
    } catch (error) {
      this.logger.warn('run stream not fully written', { runId: this.runId, error: describeError(error) });
    } finally {
      this.closed = true;
      clearTimeout(this.timer);
    }
  }

  private push(event: StreamEvent): number {
    if (this.store === null || this.closed) return 0;
    this.buffer.push(event);
    this.pushed += 1;
    if (this.buffer.length >= STREAM_BATCH_EVENTS) this.kick();
    else if (this.timer === undefined && !this.due) this.timer = setTimeout(this.onTimer, STREAM_FLUSH_MS);
    return this.pushed;
  }

  private readonly onTimer = (): void => {
    this.timer = undefined;
    this.kick();
  };

  /** The buffer should leave now, or as soon as the append in flight settles. */
  private kick(): void {
    this.due = true;
    if (!this.inFlight && this.buffer.length > 0) this.send();
  }

  private send(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer.splice(0, MAX_APPEND);
    const first = this.sent + 1;
    this.sent += batch.length;
    this.due = this.buffer.length > 0;
    this.inFlight = true;
    let appending: Promise<number>;
    try {
      appending = this.store!.appendEvents(this.runId, batch, this.fence);
    } catch (error) {
      appending = Promise.reject(error);
    }
    appending.then(
      () => this.appended(first + batch.length - 1, null),
      (error: unknown) => this.appended(first + batch.length - 1, { at: first, error }),
    );
  }

  private appended(last: number, failed: { at: number; error: unknown } | null): void {
    this.inFlight = false;
    this.settled = last;
    if (failed && this.failure === null) {
      this.failure = failed;
      if (failed.error instanceof WaypointError && failed.error.code === 'LEASE_LOST') this.onLeaseLost(failed.error);
      else this.logger.warn('run stream append failed', { runId: this.runId, error: describeError(failed.error) });
    }
    for (let i = 0; i < this.waiters.length;) {
      const waiter = this.waiters[i];
      if (waiter.through > last) {
        i += 1;
        continue;
      }
      this.waiters.splice(i, 1);
      if (this.failure !== null && waiter.through >= this.failure.at) waiter.reject(this.failure.error);
      else waiter.resolve();
    }
    if (this.buffer.length === 0) return;
    if (this.due || this.waiters.length > 0 || this.buffer.length >= STREAM_BATCH_EVENTS) this.send();
    else if (this.timer === undefined) this.timer = setTimeout(this.onTimer, STREAM_FLUSH_MS);
  }
}

/**
 * Appends the `cancelled` status of a run cancelled from outside its execution (`waypoint.cancel`, a parent's
 * cancel): unfenced, since the canceller holds no lease, and after the cancel took the lease over, so the
 * executor's own appends are refused from then on and this is the stream's last event. A failure is logged.
 *
 * @example
 * await appendCancelled(store, 'q3-aapl', logger);
 */
export async function appendCancelled(store: CheckpointStore, runId: string, logger: Logger): Promise<void> {
  if (!supportsStreams(store)) return;
  try {
    // A second cancel of a cancelled run (cancelRun returns it as it is) appends nothing.
    const length = await store.streamLength(runId);
    const [last] = length > 0 ? await store.readEvents(runId, length - 1, 1) : [];
    if (last?.kind === 'status' && last.status === 'cancelled') return;
    await store.appendEvents(runId, [{ kind: 'status', status: 'cancelled' }]);
  } catch (error) {
    logger.warn('could not append the cancelled status to the run stream', { runId, error: describeError(error) });
  }
}
