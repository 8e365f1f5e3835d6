import { LeaseLostError } from '../../contract/errors';
import type { Fence, PayloadRewrite, RewriteOutcome, StepRecord } from '../../contract/checkpoint-store';
import { encodeStep, rewriteArgs } from './codec';
import type { RedisStoreContext } from './context';
import type { JournalEntry } from './journal';
import { ALL_STATUSES } from './keys';

// The Redis store's maintenance writes (RedisCheckpointStore): retention, truncation, deletion and payload
// rewrites, each one script.

export function compactSteps(ctx: RedisStoreContext, runId: string, base: StepRecord): Promise<unknown> {
  return ctx.write('waypointCompactSteps', { r: runId, k: 'u', c: base.sequence }, ctx.keys.steps(runId), base.sequence, encodeStep(base));
}

export async function truncateSteps(ctx: RedisStoreContext, runId: string, fromSequence: number, cursor: { cursorAgent: number; cursorStep: number }, fence: Fence): Promise<void> {
  const { stems } = ctx.keys;
  const reply = await ctx.write(
    'waypointTruncateSteps',
    { r: runId, k: 'u', t: fromSequence },
    ctx.keys.run(runId),
    ctx.keys.steps(runId),
    ctx.keys.runsIndex(),
    fence.epoch,
    fromSequence,
    cursor.cursorAgent,
    cursor.cursorStep,
    stems.status,
    stems.pipeline,
  );
  if (reply === 'FENCED') throw new LeaseLostError(runId, fence.epoch);
}

export function deleteRun(ctx: RedisStoreContext, runId: string): Promise<unknown> {
  const { stems } = ctx.keys;
  return ctx.write(
    'waypointDeleteRun',
    { r: runId, k: 'd' },
    ctx.keys.run(runId),
    ctx.keys.steps(runId),
    ctx.keys.runOperations(runId),
    ctx.keys.runsIndex(),
    runId,
    stems.status,
    stems.pipeline,
    stems.operation,
    stems.parent,
    ...ALL_STATUSES,
  );
}

/**
 * One script: every swap compared and applied at once. With a journal, its notice names the rewritten
 * step range and operations, so a replica copies them again (rows it already has are not re-read otherwise).
 */
export async function rewritePayloads(ctx: RedisStoreContext, runId: string, rewrite: PayloadRewrite): Promise<RewriteOutcome> {
  const swaps = rewriteArgs(rewrite);
  if (swaps.length === 0) return { rewritten: 0, skipped: 0 };
  const entry: JournalEntry = { r: runId, k: 'u' };
  const steps = rewrite.steps ?? [];
  if (steps.length > 0) entry.p = steps.reduce((low, s) => Math.min(low, s.sequence), Infinity);
  if ((rewrite.operations ?? []).length > 0) entry.a = 1;
  const [rewritten, skipped] = (await ctx.write('waypointRewritePayloads', entry, ctx.keys.run(runId), ctx.keys.steps(runId), runId, ctx.keys.stems.operation, ...swaps)) as [
    number,
    number,
  ];
  return { rewritten: Number(rewritten), skipped: Number(skipped) };
}
