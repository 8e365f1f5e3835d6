import { LeaseLostError } from '../../contract/errors';
import type { Fence, LoadedRun, NewRun, RunPatch, RunRecord, StepAppend, StepRecord } from '../../contract/checkpoint-store';
import { decodeStep, encodeStep, encodeText, nullableArg, pairs, toRunRecord } from './codec';
import type { RedisStoreContext } from './context';
import { ALL_STATUSES } from './keys';
import { execOrThrow } from './list-runs';

// The run and step operations of the Redis store (RedisCheckpointStore): each one script or one MULTI.

export async function createRun(ctx: RedisStoreContext, run: NewRun): Promise<{ run: RunRecord; created: boolean }> {
  const { stems } = ctx.keys;
  const [created, flat] = (await ctx.write(
    'waypointCreateRun',
    { r: run.runId, k: 'u' },
    ctx.keys.run(run.runId),
    ctx.keys.runsIndex(),
    run.runId,
    run.pipelineName,
    run.pipelineVersion,
    encodeText(run.input),
    encodeText(run.metadata),
    stems.status,
    stems.pipeline,
    run.parentRunId ?? '',
    stems.parent,
    ...ALL_STATUSES,
  )) as [number, string[]];
  return { run: toRunRecord(pairs(flat))!, created: created === 1 };
}

export async function loadRun(ctx: RedisStoreContext, runId: string): Promise<LoadedRun | null> {
  // One round trip, one consistent snapshot: MULTI runs both reads with no write in between.
  const [runHash, stepsHash] = (await execOrThrow(ctx.client.multi().hgetall(ctx.keys.run(runId)).hgetall(ctx.keys.steps(runId)))) as Record<string, string>[];
  const run = toRunRecord(runHash);
  if (!run) return null;
  const steps = Object.entries(stepsHash).map(([field, value]) => decodeStep(runId, field, value));
  return { run, steps: steps.sort((a, b) => a.sequence - b.sequence) };
}

export async function listSteps(ctx: RedisStoreContext, runId: string, range: { fromSequence?: number; toSequence?: number }): Promise<StepRecord[]> {
  const flat = (await ctx.client.waypointListSteps(ctx.keys.run(runId), ctx.keys.steps(runId), range.fromSequence ?? 1, range.toSequence ?? Number.MAX_SAFE_INTEGER)) as string[];
  const steps: StepRecord[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) steps.push(decodeStep(runId, flat[i], flat[i + 1]));
  return steps;
}

export async function appendStep(ctx: RedisStoreContext, { step, run, fence }: StepAppend): Promise<void> {
  const { stems } = ctx.keys;
  const outcome = await ctx.write(
    'waypointAppendStep',
    { r: step.runId, k: 'u' },
    ctx.keys.run(step.runId),
    ctx.keys.steps(step.runId),
    ctx.keys.runOperations(step.runId),
    ctx.keys.runsIndex(),
    fence.epoch,
    step.sequence,
    encodeStep(step),
    run.cursorAgent,
    run.cursorStep,
    run.status,
    nullableArg(run.resumeHint),
    stems.status,
    stems.pipeline,
    stems.operation,
    ctx.ttlSeconds,
  );
  if (outcome === 'FENCED') throw new LeaseLostError(step.runId, fence.epoch);
  if (outcome === 'SEQUENCE') throw new LeaseLostError(step.runId, fence.epoch, step.stepName);
}

/**
 * Consecutive rows of one run in one script call (waypointAppendSteps): fenced once, every sequence checked
 * before anything is written, so a stale executor or a gap writes none of the batch. The run takes the last
 * append's cursor and status, and the last resume hint given (each would overwrite the one before).
 */
export async function appendRun(ctx: RedisStoreContext, appends: readonly StepAppend[]): Promise<void> {
  const { keys } = ctx;
  const first = appends[0];
  const last = appends[appends.length - 1];
  const runId = first.step.runId;
  let resumeHint = '';
  const rows: (string | number)[] = [];
  for (const { step, run } of appends) {
    rows.push(step.sequence, encodeStep(step));
    const hint = nullableArg(run.resumeHint);
    if (hint !== '') resumeHint = hint;
  }
  const outcome = await ctx.write(
    'waypointAppendSteps',
    { r: runId, k: 'u' },
    keys.run(runId),
    keys.steps(runId),
    keys.runOperations(runId),
    keys.runsIndex(),
    first.fence.epoch,
    last.run.cursorAgent,
    last.run.cursorStep,
    last.run.status,
    resumeHint,
    keys.stems.status,
    keys.stems.pipeline,
    keys.stems.operation,
    ctx.ttlSeconds,
    ...rows,
  );
  if (outcome === 'FENCED') throw new LeaseLostError(runId, first.fence.epoch);
  if (outcome === 'SEQUENCE') throw new LeaseLostError(runId, first.fence.epoch, first.step.stepName);
}

/**
 * A status-changing run write (waypointUpdateRun, waypointCancelRun): its keys (the run, its steps, its
 * operations, the runs index), then `args`, then what reindexing and retaining the run needs (the index
 * stems and the expiry of a finished run's keys).
 */
function writeRunStatus(ctx: RedisStoreContext, script: 'waypointUpdateRun' | 'waypointCancelRun', runId: string, args: (string | number)[]): Promise<unknown> {
  const { keys } = ctx;
  const { stems } = keys;
  const runKeys = [keys.run(runId), keys.steps(runId), keys.runOperations(runId), keys.runsIndex()];
  return ctx.write(script, { r: runId, k: 'u' }, ...runKeys, ...args, stems.status, stems.pipeline, stems.operation, ctx.ttlSeconds);
}

export async function updateRun(ctx: RedisStoreContext, runId: string, patch: RunPatch, fence: Fence | null): Promise<void> {
  const outcome = await writeRunStatus(ctx, 'waypointUpdateRun', runId, [
    fence ? '1' : '0',
    fence?.epoch ?? 0,
    patch.status ?? '',
    patch.pipelineVersion ?? '',
    patch.cursorAgent ?? '',
    patch.cursorStep ?? '',
    nullableArg(patch.error),
    nullableArg(patch.resumeHint),
  ]);
  if (outcome === 'FENCED') throw new LeaseLostError(runId, fence?.epoch ?? 0);
}

/** The store's override of the derived cancelRun (three reads and three writes): one Lua script. */
export async function cancelRun(ctx: RedisStoreContext, runId: string, resumeHint: string): Promise<RunRecord | null> {
  const reply = await writeRunStatus(ctx, 'waypointCancelRun', runId, [encodeText(resumeHint)]);
  return reply === null ? null : toRunRecord(pairs(reply));
}
