import { LeaseLostError } from '../../contract/errors';
import type { PayloadRewrite, RewriteOutcome, StepsChange } from '../../contract/checkpoint-store';
import { encodeStep, rewriteArgs } from './codec';
import type { RedisStoreContext } from './context';
import type { JournalEntry } from './journal';
import { ALL_STATUSES } from './keys';

// The Redis store's maintenance writes (RedisCheckpointStore): retention, truncation, deletion and payload
// rewrites, each one script.

/**
 * One script. Its journal notice tells a replica what it cannot see in the run's current state: a range
 * to the end was dropped (`t`, truncation), a range from the start was folded (`c`, retention), or rows
 * in the middle were rewritten (`p`, copied again).
 */
export async function replaceSteps(ctx: RedisStoreContext, runId: string, change: StepsChange): Promise<void> {
  const { stems } = ctx.keys;
  const entry: JournalEntry = { r: runId, k: 'u' };
  if (change.toSequence === undefined) entry.t = change.fromSequence;
  else if (change.fromSequence <= 1) entry.c = change.toSequence;
  else entry.p = change.fromSequence;
  const rows = change.rows.flatMap((row) => [row.sequence, encodeStep(row)]);
  const reply = await ctx.write(
    'waypointReplaceSteps',
    entry,
    ctx.keys.run(runId),
    ctx.keys.steps(runId),
    ctx.keys.runsIndex(),
    change.fence?.epoch ?? '',
    change.fromSequence,
    change.toSequence ?? '',
    change.onlyIfBefore ?? '',
    change.cursor?.cursorAgent ?? '',
    change.cursor?.cursorStep ?? '',
    stems.status,
    stems.pipeline,
    ...rows,
  );
  if (reply === 'FENCED') throw new LeaseLostError(runId, change.fence?.epoch ?? 0);
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
    ctx.keys.events(runId),
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
