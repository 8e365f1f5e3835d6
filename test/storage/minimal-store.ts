import { LeaseLostError } from '../../src/contract/errors';
import {
  CheckpointStore,
  type Fence,
  type LeaseGrant,
  type NewOperation,
  type NewRun,
  type OperationOutcome,
  type OperationRecord,
  type OperationState,
  type PayloadRewrite,
  type PayloadSwap,
  type RewriteOutcome,
  type RunFilter,
  type RunPatch,
  type RunRecord,
  type StepAppend,
  type StepRecord,
} from '../../src/contract/checkpoint-store';

/**
 * A store that writes only the contract's primitives, the way a user's backend (a key-value table) would:
 * every record is kept as a JSON string in a Map, so nothing is shared with callers and dates come back
 * revived. `loadRun`, `appendRun` and `cancelRun` are CheckpointStore's derived defaults. It exists to
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

  async createRun(run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
    const existing = this.readRun(run.runId);
    if (existing) return { run: existing, created: false };
    const now = new Date();
    const record: RunRecord = {
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
    this.putRun(record);
    this.steps.set(run.runId, new Map());
    return { run: record, created: true };
  }

  async getRun(runId: string): Promise<RunRecord | null> {
    return this.readRun(runId);
  }

  async listRuns(filter: RunFilter = {}): Promise<RunRecord[]> {
    const statuses = filter.status === undefined ? null : [filter.status].flat();
    const all = [...this.runs.keys()].map((id) => this.readRun(id)!);
    const out = all
      .filter((r) => (!statuses || statuses.includes(r.status)) && (!filter.pipelineName || r.pipelineName === filter.pipelineName))
      .filter((r) => (!filter.since || r.updatedAt >= filter.since) && (filter.parentRunId === undefined || r.parentRunId === filter.parentRunId))
      .sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || a.runId.localeCompare(b.runId));
    return out.slice(0, filter.limit ?? out.length);
  }

  async listSteps(runId: string, range: { fromSequence?: number; toSequence?: number } = {}): Promise<StepRecord[]> {
    const { fromSequence = 1, toSequence = Infinity } = range;
    return [...(this.steps.get(runId)?.entries() ?? [])]
      .filter(([sequence]) => sequence >= fromSequence && sequence <= toSequence)
      .sort(([a], [b]) => a - b)
      .map(([, text]) => revive<StepRecord>(text, ['startedAt', 'completedAt']));
  }

  async appendStep({ step, run, fence }: StepAppend): Promise<void> {
    const current = this.fenced(step.runId, fence);
    if (step.sequence !== current.lastSequence + 1) throw new LeaseLostError(step.runId, fence.epoch, step.stepName);
    this.steps.get(step.runId)!.set(step.sequence, JSON.stringify({ ...step, path: step.path ?? null }));
    this.putRun({ ...current, ...run, lastSequence: step.sequence, updatedAt: new Date() });
  }

  async updateRun(runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
    const current = fence ? this.fenced(runId, fence) : this.readRun(runId);
    if (!current) return;
    const defined = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
    this.putRun({ ...current, ...defined, updatedAt: new Date() });
  }

  async acquireLease(runId: string, owner: string, ttlMs: number, takeOverFrom?: string): Promise<LeaseGrant | null> {
    const run = this.readRun(runId);
    if (!run) return null;
    const free = run.leaseOwner === null || run.leaseOwner === owner || run.leaseOwner === takeOverFrom || (run.leaseExpiresAt ?? new Date(0)) <= new Date();
    if (!free) return null;
    const grant = { owner, epoch: run.leaseEpoch + 1, expiresAt: new Date(Date.now() + ttlMs) };
    this.putRun({ ...run, leaseOwner: owner, leaseEpoch: grant.epoch, leaseExpiresAt: grant.expiresAt });
    return grant;
  }

  async renewLease(runId: string, owner: string, epoch: number, ttlMs: number): Promise<boolean> {
    const run = this.readRun(runId);
    if (!run || run.leaseEpoch !== epoch || run.leaseOwner !== owner) return false;
    this.putRun({ ...run, leaseExpiresAt: new Date(Date.now() + ttlMs) });
    return true;
  }

  async releaseLease(runId: string, owner: string, epoch: number): Promise<void> {
    const run = this.readRun(runId);
    if (run && run.leaseEpoch === epoch && run.leaseOwner === owner) this.putRun({ ...run, leaseOwner: null, leaseExpiresAt: null });
  }

  async getOperation(operationKey: string): Promise<OperationRecord | null> {
    return this.readOp(operationKey);
  }

  async listOperations(runId: string): Promise<OperationRecord[]> {
    const all = [...this.ops.keys()].map((key) => this.readOp(key)!);
    return all.filter((op) => op.runId === runId);
  }

  async beginOperation(op: NewOperation, fence: Fence): Promise<OperationRecord> {
    this.fenced(op.runId, fence);
    const existing = this.readOp(op.operationKey);
    if (existing?.state === 'committed') return existing;
    const now = new Date();
    const record: OperationRecord = existing
      ? { ...existing, state: 'started', attempts: existing.attempts + 1, updatedAt: now }
      : { ...op, state: 'started', result: null, error: null, attempts: 1, createdAt: now, updatedAt: now };
    this.ops.set(op.operationKey, JSON.stringify(record));
    return record;
  }

  async finishOperation(operationKey: string, outcome: OperationOutcome, fence: Fence & { runId: string }): Promise<void> {
    this.fenced(fence.runId, fence);
    const op = this.readOp(operationKey);
    if (!op || op.state === 'committed') return;
    const done = outcome.state === 'committed' ? { result: outcome.result, error: null } : { error: outcome.error };
    this.ops.set(operationKey, JSON.stringify({ ...op, ...done, state: outcome.state, updatedAt: new Date() }));
  }

  async putOperation(op: NewOperation & { state: OperationState; result: string | null; error: string | null }): Promise<OperationRecord> {
    const existing = this.readOp(op.operationKey);
    if (existing) return existing;
    const now = new Date();
    const record: OperationRecord = { ...op, attempts: 1, createdAt: now, updatedAt: now };
    this.ops.set(op.operationKey, JSON.stringify(record));
    return record;
  }

  async compactSteps(runId: string, base: StepRecord): Promise<void> {
    const rows = this.steps.get(runId);
    if (!rows || rows.size === 0 || Math.min(...rows.keys()) >= base.sequence) return;
    for (const sequence of [...rows.keys()]) if (sequence <= base.sequence) rows.delete(sequence);
    rows.set(base.sequence, JSON.stringify({ ...base, path: base.path ?? null }));
  }

  async truncateSteps(runId: string, fromSequence: number, cursor: { cursorAgent: number; cursorStep: number }, fence: Fence): Promise<void> {
    const run = this.fenced(runId, fence);
    const rows = this.steps.get(runId)!;
    for (const sequence of [...rows.keys()]) if (sequence >= fromSequence) rows.delete(sequence);
    this.putRun({ ...run, ...cursor, lastSequence: Math.min(run.lastSequence, fromSequence - 1), updatedAt: new Date() });
  }

  async deleteRun(runId: string): Promise<void> {
    this.runs.delete(runId);
    this.steps.delete(runId);
    for (const op of await this.listOperations(runId)) this.ops.delete(op.operationKey);
  }

  async rewritePayloads(runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
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
