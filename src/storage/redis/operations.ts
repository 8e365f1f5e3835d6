import { LeaseLostError } from '../../contract/errors';
import type { Fence, NewOperation, OperationRecord, OperationState } from '../../contract/checkpoint-store';
import { encodeText, nullableArg, pairs, toOperationRecord } from './codec';
import type { RedisStoreContext } from './context';

// The side-effect operation records of the Redis store (RedisCheckpointStore): one hash each, indexed per run.

export async function getOperation(ctx: RedisStoreContext, operationKey: string): Promise<OperationRecord | null> {
  return toOperationRecord(await ctx.client.hgetall(ctx.keys.operation(operationKey)));
}

export async function beginOperation(ctx: RedisStoreContext, op: NewOperation, fence: Fence): Promise<OperationRecord> {
  const reply = await ctx.write(
    'waypointBeginOperation',
    { r: op.runId, k: 'u', o: op.operationKey },
    ctx.keys.run(op.runId),
    ctx.keys.operation(op.operationKey),
    ctx.keys.steps(op.runId),
    ctx.keys.runOperations(op.runId),
    fence.epoch,
    op.operationKey,
    op.runId,
    op.stepKey,
    op.name,
    ctx.keys.stems.operation,
    ctx.ttlSeconds,
  );
  if (reply === 'FENCED') throw new LeaseLostError(op.runId, fence.epoch);
  return toOperationRecord(pairs(reply))!;
}

export async function finishOperation(
  ctx: RedisStoreContext,
  operationKey: string,
  outcome: { state: 'committed'; result: string } | { state: 'failed'; error: string },
  fence: Fence & { runId: string },
): Promise<void> {
  const payload = outcome.state === 'committed' ? outcome.result : outcome.error;
  const reply = await ctx.write(
    'waypointFinishOperation',
    { r: fence.runId, k: 'u', o: operationKey },
    ctx.keys.run(fence.runId),
    ctx.keys.operation(operationKey),
    fence.epoch,
    outcome.state,
    encodeText(payload),
  );
  if (reply === 'FENCED') throw new LeaseLostError(fence.runId, fence.epoch);
}

export async function listOperations(ctx: RedisStoreContext, runId: string): Promise<OperationRecord[]> {
  const hashes = (await ctx.client.waypointListOperations(ctx.keys.runOperations(runId), ctx.keys.stems.operation)) as unknown[];
  return hashes.map((flat) => toOperationRecord(pairs(flat))!);
}

export async function putOperation(ctx: RedisStoreContext, op: NewOperation & { state: OperationState; result: string | null; error: string | null }): Promise<OperationRecord> {
  const reply = await ctx.write(
    'waypointPutOperation',
    { r: op.runId, k: 'u', o: op.operationKey },
    ctx.keys.run(op.runId),
    ctx.keys.operation(op.operationKey),
    ctx.keys.steps(op.runId),
    ctx.keys.runOperations(op.runId),
    op.operationKey,
    op.runId,
    op.stepKey,
    op.name,
    op.state,
    nullableArg(op.result),
    nullableArg(op.error),
    ctx.keys.stems.operation,
    ctx.ttlSeconds,
  );
  return toOperationRecord(pairs(reply))!;
}
