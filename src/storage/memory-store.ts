import { LeaseLostError, RunNotFoundError } from '../contract/errors';
import { storedEvent, streamRow } from './stream-rows';
import { StreamWaiters } from './stream-waiters';
import { settled } from './settled';
import {
  CheckpointStore,
  type Fence,
  type LeaseGrant,
  type NewRun,
  type OperationRecord,
  type OperationWrite,
  type OperationCondition,
  type PayloadRewrite,
  type PayloadSwap,
  type RewriteOutcome,
  type RunFilter,
  type RunPatch,
  type RunRecord,
  type StepAppend,
  type StepRecord,
  type StepsChange,
  type StoredStreamEvent,
  type StreamEvent,
  checkStreamAppend,
  checkStreamRead,
  swapCount,
} from '../contract/checkpoint-store';

/**
 * The reference implementation of the store contract, in process memory. Nothing survives the process:
 * use it for tests and for learning the API. Records are copied in and out, so callers can never alias
 * stored state. It offers no transactions (there is no database to share with your own writes), so a
 * transactional side effect fails here with `TransactionsUnsupportedError`. It writes only the contract's
 * primitives: every derived method (`loadRun`, `cancelRun`, `beginOperation`, ...) is `CheckpointStore`'s default.
 *
 * @example
 * const waypoint = await Waypoint.create({ modules: [memoryStorage()] });
 */
export class MemoryCheckpointStore extends CheckpointStore {
  readonly backend = 'memory';
  private readonly runs = new Map<string, RunRecord>();
  private readonly steps = new Map<string, StepRecord[]>();
  private readonly operations = new Map<string, OperationRecord>();
  private readonly streams = new Map<string, StoredStreamEvent[]>();
  /** In process only: every writer of this store is in this process, so its appends are the only wake-ups. */
  private readonly waiters = new StreamWaiters(null);
  private readonly now: () => Date;

  constructor(now: () => Date = () => new Date()) {
    super();
    this.now = now;
  }

  async init(): Promise<void> {}
  async close(): Promise<void> {}

  createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    return settled(() => {
      const existing = this.runs.get(run.runId);
      if (existing) return { run: { ...existing }, created: false };
      const record = newRunRecord(run, this.now());
      this.runs.set(run.runId, record);
      this.steps.set(run.runId, []);
      return { run: { ...record }, created: true };
    });
  }

  getRun(runId: string): Promise<RunRecord | null> {
    return settled(() => {
      const run = this.runs.get(runId);
      return run ? { ...run } : null;
    });
  }

  listRuns(filter: RunFilter = {}): Promise<RunRecord[]> {
    return settled(() => {
      return selectRuns([...this.runs.values()], filter).map((r) => ({ ...r }));
    });
  }

  listSteps(runId: string, range: { fromSequence?: number; toSequence?: number } = {}): Promise<StepRecord[]> {
    return settled(() => {
      const from = range.fromSequence ?? 1;
      const to = range.toSequence ?? Number.MAX_SAFE_INTEGER;
      return (this.steps.get(runId) ?? []).filter((s) => s.sequence >= from && s.sequence <= to).map((s) => ({ ...s }));
    });
  }

  appendStep({ step, run, fence }: StepAppend): Promise<void> {
    return settled(() => {
      const current = this.fenced(step.runId, fence);
      if (step.sequence !== current.lastSequence + 1) throw new LeaseLostError(step.runId, fence.epoch, step.stepName);
      this.steps.get(step.runId)!.push(storedStep(step));
      Object.assign(current, run, { lastSequence: step.sequence, updatedAt: this.now() });
    });
  }

  updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    return settled(() => {
      const current = fence ? this.fenced(runId, fence) : this.runs.get(runId);
      if (!current) return;
      Object.assign(current, definedOnly(patch), { updatedAt: this.now() });
    });
  }

  acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    return settled(() => {
      const run = this.runs.get(runId);
      if (!run) return null;
      const now = this.now();
      const held = run.leaseOwner !== null && run.leaseOwner !== owner && run.leaseOwner !== takeOverFrom && run.leaseExpiresAt !== null && run.leaseExpiresAt > now;
      if (held) return null;
      run.leaseOwner = owner;
      run.leaseEpoch += 1;
      run.leaseExpiresAt = new Date(now.getTime() + ttlMs);
      return { owner, epoch: run.leaseEpoch, expiresAt: run.leaseExpiresAt };
    });
  }

  setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
    return settled(() => {
      const run = this.runs.get(runId);
      if (!run || run.leaseEpoch !== epoch || run.leaseOwner !== owner) return false;
      run.leaseOwner = ttlMs === null ? null : owner;
      run.leaseExpiresAt = ttlMs === null ? null : new Date(this.now().getTime() + ttlMs);
      return true;
    });
  }

  getOperation(operationKey: string): Promise<OperationRecord | null> {
    return settled(() => {
      const op = this.operations.get(operationKey);
      return op ? { ...op } : null;
    });
  }

  listOperations(runId: string): Promise<OperationRecord[]> {
    return settled(() => [...this.operations.values()].filter((o) => o.runId === runId).map((o) => ({ ...o })));
  }

  writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
    return settled(() => {
      if ('fence' in condition) this.fenced(record.runId, condition.fence);
      const existing = this.operations.get(record.operationKey);
      if (existing && ('ifAbsent' in condition || existing.state === 'committed')) return { ...existing };
      const now = this.now();
      const stored: OperationRecord = { ...record, createdAt: existing?.createdAt ?? now, updatedAt: now };
      this.operations.set(record.operationKey, stored);
      return { ...stored };
    });
  }

  replaceSteps(runId: string, change: StepsChange): Promise<void> {
    return settled(() => {
      const run = change.fence ? this.fenced(runId, change.fence) : this.runs.get(runId);
      const rows = this.steps.get(runId);
      if (!run || !rows) return;
      if (change.onlyIfBefore !== undefined && !rows.some((s) => s.sequence < change.onlyIfBefore!)) return;
      this.steps.set(runId, replaceRange(rows, change, storedStep));
      if (!change.cursor) return;
      const last = this.steps.get(runId)!.at(-1)?.sequence ?? 0;
      Object.assign(run, change.cursor, { lastSequence: last, updatedAt: this.now() });
    });
  }

  deleteRun(runId: string): Promise<void> {
    return settled(() => {
      this.runs.delete(runId);
      this.steps.delete(runId);
      this.streams.delete(runId);
      for (const [key, op] of this.operations) if (op.runId === runId) this.operations.delete(key);
    });
  }

  rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    return settled(() => {
      const run = this.runs.get(runId);
      if (!run) return { rewritten: 0, skipped: swapCount(rewrite) };
      const outcome: RewriteOutcome = { rewritten: 0, skipped: 0 };
      // Compare and write with no await in between: nothing else in this process runs meanwhile.
      const swap = (current: string | null | undefined, change: PayloadSwap | undefined, write: (to: string) => void) => {
        if (!change) return;
        if (current === change.from) {
          write(change.to);
          outcome.rewritten += 1;
        } else {
          outcome.skipped += 1;
        }
      };
      swap(run.input, rewrite.input, (to) => (run.input = to));
      swap(run.error, rewrite.error, (to) => (run.error = to));
      const rows = this.steps.get(runId) ?? [];
      for (const change of rewrite.steps ?? []) {
        const row = rows.find((s) => s.sequence === change.sequence);
        swap(row?.output, change.output, (to) => (row!.output = to));
        swap(row?.memory, change.memory, (to) => (row!.memory = to));
      }
      for (const change of rewrite.operations ?? []) {
        const op = this.operations.get(change.operationKey);
        const own = op?.runId === runId ? op : undefined;
        swap(own?.result, change.result, (to) => (own!.result = to));
        swap(own?.error, change.error, (to) => (own!.error = to));
      }
      return outcome;
    });
  }

  /** Appends to the run's stream in process; waiters of this store are woken at once. */
  override appendEvents(runId: string, events: readonly StreamEvent[], fence?: Fence): Promise<number> {
    return settled(() => {
      checkStreamAppend(runId, events);
      if (fence) this.fenced(runId, fence);
      else if (!this.runs.has(runId)) throw new RunNotFoundError(runId);
      const stream = this.streams.get(runId) ?? [];
      this.streams.set(runId, stream);
      const first = stream.length;
      const createdAt = this.now();
      // Stored in its normal form (no stray properties, no `detail: undefined`), as the other backends read it back.
      for (const event of events) stream.push(storedEvent(streamRow(event, stream.length, createdAt)));
      this.waiters.notify(runId);
      return first;
    });
  }

  /** The run's stream events from `from` on, copied out. */
  override readEvents(runId: string, from: number, limit: number): Promise<StoredStreamEvent[]> {
    return settled(() => {
      const max = checkStreamRead(runId, from, limit);
      return (this.streams.get(runId) ?? []).slice(from, from + max).map((e) => ({ ...e }));
    });
  }

  /** Woken by this store's own appends (no other writer can reach its memory). */
  override async waitForEvents(runId: string, from: number, signal: AbortSignal): Promise<boolean> {
    checkStreamRead(runId, from);
    return this.waiters.wait(runId, from, signal, () => this.streamLength(runId));
  }

  /** Deletes the run's stream; the run stays. */
  override dropStream(runId: string): Promise<number> {
    return settled(() => {
      const dropped = this.streams.get(runId)?.length ?? 0;
      this.streams.delete(runId);
      return dropped;
    });
  }

  /** How many events the run's stream holds. */
  override streamLength(runId: string): Promise<number> {
    return settled(() => this.streams.get(runId)?.length ?? 0);
  }

  private fenced(runId: string, fence: Fence): RunRecord {
    const run = this.runs.get(runId);
    if (!run || run.leaseEpoch !== fence.epoch) throw new LeaseLostError(runId, fence.epoch);
    return run;
  }
}

/**
 * The store's own copy of an appended row, field by field: one object of one shape for every row, where
 * a spread copied whatever shape the caller's object had (a step's row is copied at every step).
 */
function storedStep(step: StepRecord): StepRecord {
  return {
    runId: step.runId,
    sequence: step.sequence,
    checkpointId: step.checkpointId,
    agentIndex: step.agentIndex,
    agentId: step.agentId,
    stepIndex: step.stepIndex,
    stepName: step.stepName,
    status: step.status,
    output: step.output,
    memory: step.memory,
    idempotencyKey: step.idempotencyKey,
    sideEffectsCommitted: step.sideEffectsCommitted,
    startedAt: step.startedAt,
    completedAt: step.completedAt,
    attempt: step.attempt,
    sha256: step.sha256,
    path: step.path ?? null,
  };
}

/** A new run as `createRun` stores it: running, at the start, never leased. */
export function newRunRecord(run: NewRun, now: Date): RunRecord {
  return {
    ...run,
    parentRunId: run.parentRunId ?? null,
    status: 'running',
    cursorAgent: 0,
    cursorStep: 0,
    lastSequence: 0,
    leaseOwner: null,
    leaseEpoch: 0,
    leaseExpiresAt: null,
    error: null,
    resumeHint: null,
    createdAt: now,
    updatedAt: now,
  };
}

/** The runs `listRuns(filter)` returns, in its order: last updated first, then by id. Not copied. */
export function selectRuns(runs: readonly RunRecord[], filter: RunFilter): RunRecord[] {
  const statuses = filter.status === undefined ? null : new Set(Array.isArray(filter.status) ? filter.status : [filter.status]);
  const out = runs
    .filter((r) => (statuses ? statuses.has(r.status) : true))
    .filter((r) => (filter.pipelineName ? r.pipelineName === filter.pipelineName : true))
    .filter((r) => (filter.since ? r.updatedAt.getTime() >= filter.since.getTime() : true))
    .filter((r) => (filter.parentRunId !== undefined ? r.parentRunId === filter.parentRunId : true))
    .sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || a.runId.localeCompare(b.runId));
  return out.slice(0, filter.limit ?? out.length);
}

/**
 * `rows` (ascending by sequence) with the range of `change` replaced by its rows, still ascending.
 * `copy` makes the stored form of a new row.
 */
export function replaceRange<T extends { sequence: number }>(rows: readonly T[], change: StepsChange, copy: (row: StepRecord) => T): T[] {
  const to = change.toSequence ?? Number.POSITIVE_INFINITY;
  const before = rows.filter((s) => s.sequence < change.fromSequence);
  const after = rows.filter((s) => s.sequence > to);
  return [...before, ...change.rows.map(copy), ...after];
}

/** The fields of a patch that are set (`undefined` means: leave it). */
export function definedOnly<T extends object>(patch: T): Partial<T> {
  return Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)) as Partial<T>;
}
