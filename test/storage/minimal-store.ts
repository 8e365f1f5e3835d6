import { LeaseLostError } from '../../src/contract/errors';
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
} from '../../src/contract/checkpoint-store';
import { definedOnly, newRunRecord, selectRuns } from '../../src/storage/memory-store';
import { settled } from '../../src/storage/settled';

/**
 * A store that writes only the contract's primitives, the way a user's backend (a key-value table) would:
 * every record is kept as a JSON string in a Map, so nothing is shared with callers and dates come back
 * revived. Every derived method (`loadRun`, `appendRun`, `cancelRun`, the lease, step-range and operation
 * helpers) is CheckpointStore's default; the record helpers are memory-store's. It exists to
 * prove that the primitives are enough: test/storage/minimal-store.test.ts runs the shipped conformance
 * suite against it.
 */
export class MinimalCheckpointStore extends CheckpointStore {
  readonly backend = 'minimal';
  private readonly runs = new Map<string, string>();
  private readonly steps = new Map<string, Map<number, string>>(); // runId -> sequence -> row
  private readonly ops = new Map<string, string>();

  async init(): Promise<void> {}
  async close(): Promise<void> {}

  createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    return settled(() => {
      const existing = this.readRun(run.runId);
      if (existing) return { run: existing, created: false };
      const record = newRunRecord(run, new Date());
      this.putRun(record);
      this.steps.set(run.runId, new Map());
      return { run: record, created: true };
    });
  }

  getRun(runId: string): Promise<RunRecord | null> {
    return settled(() => {
      return this.readRun(runId);
    });
  }

  listRuns(filter: RunFilter = {}): Promise<RunRecord[]> {
    return settled(() => {
      return selectRuns(
        [...this.runs.keys()].map((id) => this.readRun(id)!),
        filter,
      );
    });
  }

  listSteps(runId: string, range: { fromSequence?: number; toSequence?: number } = {}): Promise<StepRecord[]> {
    return settled(() => {
      const { fromSequence = 1, toSequence = Infinity } = range;
      return [...(this.steps.get(runId)?.entries() ?? [])]
        .filter(([sequence]) => sequence >= fromSequence && sequence <= toSequence)
        .sort(([a], [b]) => a - b)
        .map(([, text]) => revive<StepRecord>(text, ['startedAt', 'completedAt']));
    });
  }

  appendStep({ step, run, fence }: StepAppend): Promise<void> {
    return settled(() => {
      const current = this.fenced(step.runId, fence);
      if (step.sequence !== current.lastSequence + 1) throw new LeaseLostError(step.runId, fence.epoch, step.stepName);
      this.steps.get(step.runId)!.set(step.sequence, JSON.stringify({ ...step, path: step.path ?? null }));
      this.putRun({ ...current, ...run, lastSequence: step.sequence, updatedAt: new Date() });
    });
  }

  updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    return settled(() => {
      const current = fence ? this.fenced(runId, fence) : this.readRun(runId);
      if (!current) return;
      this.putRun({ ...current, ...definedOnly(patch), updatedAt: new Date() });
    });
  }

  acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    return settled(() => {
      const run = this.readRun(runId);
      if (!run) return null;
      const free = run.leaseOwner === null || run.leaseOwner === owner || run.leaseOwner === takeOverFrom || (run.leaseExpiresAt ?? new Date(0)) <= new Date();
      if (!free) return null;
      const grant = { owner, epoch: run.leaseEpoch + 1, expiresAt: new Date(Date.now() + ttlMs) };
      this.putRun({ ...run, leaseOwner: owner, leaseEpoch: grant.epoch, leaseExpiresAt: grant.expiresAt });
      return grant;
    });
  }

  setLeaseExpiry(runId: string, owner: string, epoch: number, ttlMs: number | null): Promise<boolean> {
    return settled(() => {
      const run = this.readRun(runId);
      if (!run || run.leaseEpoch !== epoch || run.leaseOwner !== owner) return false;
      const lease = ttlMs === null ? { leaseOwner: null, leaseExpiresAt: null } : { leaseExpiresAt: new Date(Date.now() + ttlMs) };
      this.putRun({ ...run, ...lease });
      return true;
    });
  }

  getOperation(operationKey: string): Promise<OperationRecord | null> {
    return settled(() => {
      return this.readOp(operationKey);
    });
  }

  listOperations(runId: string): Promise<OperationRecord[]> {
    return settled(() => {
      const all = [...this.ops.keys()].map((key) => this.readOp(key)!);
      return all.filter((op) => op.runId === runId);
    });
  }

  writeOperation(record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
    return settled(() => {
      if ('fence' in condition) this.fenced(record.runId, condition.fence);
      const existing = this.readOp(record.operationKey);
      if (existing && ('ifAbsent' in condition || existing.state === 'committed')) return existing;
      const now = new Date();
      const stored: OperationRecord = { ...record, createdAt: existing?.createdAt ?? now, updatedAt: now };
      this.ops.set(record.operationKey, JSON.stringify(stored));
      return stored;
    });
  }

  replaceSteps(runId: string, change: StepsChange): Promise<void> {
    return settled(() => {
      const run = change.fence ? this.fenced(runId, change.fence) : this.readRun(runId);
      const rows = this.steps.get(runId);
      if (!run || !rows) return;
      if (change.onlyIfBefore !== undefined && ![...rows.keys()].some((sequence) => sequence < change.onlyIfBefore!)) return;
      const to = change.toSequence ?? Infinity;
      for (const sequence of [...rows.keys()]) if (sequence >= change.fromSequence && sequence <= to) rows.delete(sequence);
      for (const row of change.rows) rows.set(row.sequence, JSON.stringify({ ...row, path: row.path ?? null }));
      if (change.cursor) this.putRun({ ...run, ...change.cursor, lastSequence: Math.max(0, ...rows.keys()), updatedAt: new Date() });
    });
  }

  async deleteRun(runId: string): Promise<void> {
    this.runs.delete(runId);
    this.steps.delete(runId);
    for (const op of await this.listOperations(runId)) this.ops.delete(op.operationKey);
  }

  rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
    return settled(() => {
      const outcome: RewriteOutcome = { rewritten: 0, skipped: 0 };
      // Every compare and its write happen with no await in between, so each swap is atomic.
      const swap = <T extends object>(table: Map<string | number, string> | undefined, key: string | number, field: keyof T & string, change?: PayloadSwap) => {
        if (!change) return;
        const text = table?.get(key);
        const row = text === undefined ? undefined : (JSON.parse(text) as Record<string, unknown>);
        const ours = row !== undefined && (row.runId === runId || table === this.steps.get(runId));
        if (ours && row[field] === change.from) {
          table!.set(key, JSON.stringify({ ...row, [field]: change.to }));
          outcome.rewritten += 1;
        } else outcome.skipped += 1;
      };
      const runs = this.runs as Map<string | number, string>;
      swap<RunRecord>(runs, runId, 'input', rewrite.input);
      swap<RunRecord>(runs, runId, 'error', rewrite.error);
      const steps = this.steps.get(runId) as Map<string | number, string> | undefined;
      for (const s of rewrite.steps ?? []) {
        swap<StepRecord>(steps, s.sequence, 'output', s.output);
        swap<StepRecord>(steps, s.sequence, 'memory', s.memory);
      }
      const ops = this.ops as Map<string | number, string>;
      for (const o of rewrite.operations ?? []) {
        swap<OperationRecord>(ops, o.operationKey, 'result', o.result);
        swap<OperationRecord>(ops, o.operationKey, 'error', o.error);
      }
      return outcome;
    });
  }

  private putRun(run: RunRecord): void {
    this.runs.set(run.runId, JSON.stringify(run));
  }

  // Reads are synchronous so that no primitive awaits between its check and its write: each is atomic.
  private readRun(runId: string): RunRecord | null {
    const text = this.runs.get(runId);
    return text === undefined ? null : revive<RunRecord>(text, ['createdAt', 'updatedAt', 'leaseExpiresAt']);
  }

  private readOp(operationKey: string): OperationRecord | null {
    const text = this.ops.get(operationKey);
    return text === undefined ? null : revive<OperationRecord>(text, ['createdAt', 'updatedAt']);
  }

  private fenced(runId: string, fence: Fence): RunRecord {
    const run = this.readRun(runId);
    if (!run || run.leaseEpoch !== fence.epoch) throw new LeaseLostError(runId, fence.epoch);
    return run;
  }
}

/** Parses a stored record and turns its ISO date fields back into Dates. */
function revive<T>(text: string, dates: string[]): T {
  const record = JSON.parse(text) as Record<string, unknown>;
  for (const key of dates) if (typeof record[key] === 'string') record[key] = new Date(record[key]);
  return record as T;
}
