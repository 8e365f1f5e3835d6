import { createHash, randomUUID } from 'node:crypto';
import type { CheckpointStore, StepRecord } from '../src/index';
import { nextRunId } from './timed-run';

/**
 * The store's own append, without the runtime: `appendStep` called in a loop with prebuilt rows on a
 * leased run. Between the raw floor and the full step it splits the gap in two: what the SQL / script of
 * the append costs (two writes, the fence, the wider row) and what the runtime adds around it.
 */
export class StoreAppendFloor {
  readonly what = 'store.appendStep alone';

  /** `forget`: drops a finished batch's run (BenchWaypoint.forget), outside the timing. */
  constructor(
    private readonly store: CheckpointStore,
    private readonly forget: (runId: string) => Promise<void> = () => Promise.resolve(),
  ) {}

  /** Appends n prebuilt rows to a fresh run, one call each; returns µs per append. */
  async batch(n: number, payload: string): Promise<number> {
    const runId = nextRunId('append-only');
    await this.store.createRun({ runId, pipelineName: 'append-only', pipelineVersion: '1.0.0', input: '{"subject":"bench"}', metadata: '{}' });
    const lease = await this.store.acquireLease(runId, 'bench-append-only', 30_000);
    if (!lease) throw new Error(`could not lease '${runId}'`);
    const rows = Array.from({ length: n }, (_, i) => benchStepRow(runId, i + 1, payload));
    const start = performance.now();
    for (const [i, step] of rows.entries()) {
      await this.store.appendStep({ step, run: { cursorAgent: 0, cursorStep: i + 1, status: 'running', resumeHint: null }, fence: { epoch: lease.epoch } });
    }
    const perAppend = ((performance.now() - start) * 1000) / n;
    await this.store.releaseLease(runId, 'bench-append-only', lease.epoch);
    await this.forget(runId);
    return perAppend;
  }
}

/** A step row shaped like the runtime's (same field sizes: uuid, hex digests, names). */
export function benchStepRow(runId: string, sequence: number, output: string): StepRecord {
  const now = new Date();
  const hex = (text: string) => createHash('sha256').update(text).digest('hex');
  return {
    runId,
    sequence,
    checkpointId: randomUUID(),
    agentIndex: Math.floor((sequence - 1) / 50),
    agentId: `append_onlyAgent${Math.floor((sequence - 1) / 50)}`,
    stepIndex: (sequence - 1) % 50,
    stepName: `s${sequence - 1}`,
    status: 'completed',
    output,
    memory: null,
    idempotencyKey: hex(`step:${runId}:${sequence}`),
    sideEffectsCommitted: false,
    startedAt: now,
    completedAt: now,
    attempt: 1,
    sha256: hex(output),
  };
}
