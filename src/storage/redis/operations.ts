import { LeaseLostError } from '../../contract/errors';
import type { Fence, NewOperation, OperationCondition, OperationRecord, OperationWrite } from '../../contract/checkpoint-store';
import { encodeText, nullableArg, pairs, toOperationRecord } from './codec';
import type { RedisStoreContext } from './context';

// The side-effect operation records of the Redis store (RedisCheckpointStore): one hash each, indexed per run.

export async function getOperation(ctx: RedisStoreContext, operationKey: string): Promise<OperationRecord | null> {
  return toOperationRecord(await ctx.client.hgetall(ctx.keys.operation(operationKey)));
}

/**
 * The keys and leading arguments of waypointBeginOperation and waypointWriteOperation: the run, the record
 * and its run's indexes, then the fence ('' for none), the retention arguments and the record's identity.
 */
function operationArgs(ctx: RedisStoreContext, op: NewOperation, epoch: number | ''): (string | number)[] {
  const { keys } = ctx;
  const records = [keys.run(op.runId), keys.operation(op.operationKey), keys.steps(op.runId), keys.runOperations(op.runId)];
  return [...records, epoch, keys.stems.operation, ctx.ttlSeconds, op.operationKey, op.runId, op.stepKey, op.name];
}

export async function beginOperation(ctx: RedisStoreContext, op: NewOperation, fence: Fence): Promise<OperationRecord> {
  const reply = await ctx.write('waypointBeginOperation', { r: op.runId, k: 'u', o: op.operationKey }, ...operationArgs(ctx, op, fence.epoch));
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

export async function writeOperation(ctx: RedisStoreContext, record: OperationWrite, condition: OperationCondition): Promise<OperationRecord> {
  const epoch = 'fence' in condition ? condition.fence.epoch : '';
  const reply = await ctx.write(
    'waypointWriteOperation',
    { r: record.runId, k: 'u', o: record.operationKey },
    ...operationArgs(ctx, record, epoch),
    record.state,
    nullableArg(record.result),
    nullableArg(record.error),
    record.attempts,
  );
  if (reply === 'FENCED') throw new LeaseLostError(record.runId, epoch === '' ? 0 : epoch);
  return toOperationRecord(pairs(reply))!;
}
